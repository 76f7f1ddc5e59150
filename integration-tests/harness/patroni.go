package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// HA is a highly available PostgreSQL: three PostgreSQL nodes managed by
// Patroni, with a one-member etcd as the consensus store, all on loopback
// under a temporary directory and torn down when the test ends. Patroni
// and etcd come from Debian's packages, installed by the project's script
// when missing.
//
// Every node is reached through proxies of its own: the services' (Node.
// Proxy) and the other nodes' (Node.ReplProxy: replication, pg_rewind),
// and each node's Patroni reaches etcd through another (Node.EtcdProxy):
// blackholing all three cuts the node off the network, and latency on the
// replication proxies puts the nodes at a distance from each other.
type HA struct {
	t     testing.TB
	dir   string
	Sync  bool
	Nodes []*Node
	etcd  *exec.Cmd
	// etcdAddr is etcd's client address.
	etcdAddr string
	cred     *syscall.Credential
	http     *http.Client
	// Reinitialized names the replicas WaitHealthy had Patroni rebuild
	// from the leader, in order (see WaitHealthy).
	Reinitialized []string
}

// Node is one PostgreSQL node of an HA cluster and its Patroni.
type Node struct {
	Name string
	// Proxy is where the services reach the node's PostgreSQL; ReplProxy
	// where the other nodes do.
	Proxy, ReplProxy *Proxy
	// EtcdProxy is where the node's Patroni reaches etcd.
	EtcdProxy *Proxy
	pgAddr    string
	apiAddr   string
	config    string
	dataDir   string
	logPath   string
	cmd       *exec.Cmd
	exited    chan struct{}
	ha        *HA
}

// haScope is the Patroni cluster's name.
const haScope = "checkout-lock"

// StartHA starts etcd and three Patroni nodes, and waits until they form a
// healthy cluster: a leader and two streaming replicas, one of them the
// synchronous standby when sync is set (Patroni's synchronous_mode).
func StartHA(t testing.TB, sync bool) *HA {
	t.Helper()
	for _, p := range [][2]string{{"patroni", "patroni"}, {"etcd", "etcd-server"}} {
		if out, err := exec.Command(scriptPath("ensure-package.sh"), p[0], p[1]).CombinedOutput(); err != nil {
			t.Fatalf("install %s: %v\n%s", p[1], err, out)
		}
	}
	pgBin, err := postgresBinDir()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "checkout-lock-ha-*")
	if err != nil {
		t.Fatal(err)
	}
	h := &HA{t: t, dir: dir, Sync: sync, http: &http.Client{Timeout: 3 * time.Second}}
	t.Cleanup(h.stop)
	h.cred = postgresOwner(t, dir)
	h.startEtcd()
	for i := range 3 {
		n := &Node{Name: fmt.Sprintf("node%d", i+1), pgAddr: freeAddr(t), apiAddr: freeAddr(t), ha: h,
			dataDir: filepath.Join(dir, fmt.Sprintf("node%d", i+1)),
			logPath: logPath(t, fmt.Sprintf("patroni-node%d", i+1))}
		n.Proxy = NewProxy(t, n.pgAddr)
		n.ReplProxy = NewProxy(t, n.pgAddr)
		n.EtcdProxy = NewProxy(t, h.etcdAddr)
		n.config = filepath.Join(dir, n.Name+".yml")
		if err := os.WriteFile(n.config, []byte(n.yaml(pgBin, sync)), 0o644); err != nil {
			t.Fatal(err)
		}
		h.Nodes = append(h.Nodes, n)
	}
	// The first node bootstraps alone, so it is the first leader; the
	// others then clone it.
	h.Nodes[0].Start()
	h.Await(90*time.Second, "a leader", func(c HAState) bool { return c.Leader != "" })
	h.Nodes[1].Start()
	h.Nodes[2].Start()
	h.WaitHealthy(120 * time.Second)
	return h
}

// postgresOwner is the credential PostgreSQL's processes run under: none
// (this process's) unless this process is root, which PostgreSQL refuses
// to run as: then the postgres user's, who is given dir.
func postgresOwner(t testing.TB, dir string) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root needs a postgres user to run PostgreSQL as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// scriptPath is the path of one of the project's scripts.
func scriptPath(name string) string {
	return filepath.Join(repoRoot(), "scripts", name)
}

// postgresBinDir is the newest Debian PostgreSQL's bin directory.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi < vj
	})
	if len(dirs) == 0 {
		return "", errors.New("no PostgreSQL server binaries under /usr/lib/postgresql (Debian's postgresql package)")
	}
	return dirs[len(dirs)-1], nil
}

func (h *HA) startEtcd() {
	h.t.Helper()
	client, peer := freeAddr(h.t), freeAddr(h.t)
	h.etcdAddr = client
	log, err := os.Create(logPath(h.t, "etcd"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("etcd", "--name", "etcd", "--data-dir", filepath.Join(h.dir, "etcd"),
		"--listen-client-urls", "http://"+client, "--advertise-client-urls", "http://"+client,
		"--listen-peer-urls", "http://"+peer, "--initial-advertise-peer-urls", "http://"+peer,
		"--initial-cluster", "etcd=http://"+peer, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		h.t.Fatalf("start etcd: %v", err)
	}
	h.etcd = cmd
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := h.http.Get("http://" + client + "/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("etcd did not become healthy: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // polling with a deadline
	}
}

// yaml is the node's Patroni configuration. Failure detection is tuned for
// a test (a leader key lives 10 s instead of 30); everything else is
// Patroni's and PostgreSQL's defaults.
func (n *Node) yaml(pgBin string, sync bool) string {
	return fmt.Sprintf(`scope: %[1]s
name: %[2]s
log:
  level: INFO
restapi:
  listen: %[3]s
  connect_address: %[3]s
etcd3:
  hosts: %[4]s
  use_proxies: true
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: %[5]t
    postgresql:
      use_pg_rewind: true
      remove_data_directory_on_rewind_failure: true
      remove_data_directory_on_diverged_timelines: true
      parameters:
        max_connections: 200
        wal_log_hints: "on"
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - locale: C
postgresql:
  listen: %[6]s
  connect_address: %[7]s
  data_dir: %[8]s
  bin_dir: %[9]s
  pgpass: %[10]s
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: postgres
      password: postgres
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: %[11]s
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
`, haScope, n.Name, n.apiAddr, n.EtcdProxy.Addr(), sync, n.pgAddr, n.ReplProxy.Addr(), n.dataDir, pgBin,
		filepath.Join(n.ha.dir, n.Name+".pgpass"), n.ha.dir)
}

// Start starts the node's Patroni (again, after Kill).
func (n *Node) Start() {
	t := n.ha.t
	t.Helper()
	log, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command("patroni", n.config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = n.ha.dir
	cmd.Env = append(os.Environ(), "HOME="+n.ha.dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: n.ha.cred}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start patroni %s: %v", n.Name, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.exited)
}

// Kill kills the node's Patroni and its PostgreSQL with SIGKILL, as when
// the host dies: no shutdown, no goodbye to etcd or to the clients, and no
// backend that goes on serving its connection for a moment after the
// postmaster is gone.
func (n *Node) Kill() {
	n.ha.t.Helper()
	pid := n.postmasterPID()
	if pid > 0 {
		freeze(pid)
	}
	if n.cmd != nil {
		_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		<-n.exited
	}
	if pid > 0 {
		killAndWait(pid)
	}
}

// freeze stops a postmaster (SIGSTOP) and kills its backends (SIGKILL):
// frozen first, it cannot notice its children dying and start new ones.
func freeze(postmaster int) {
	_ = syscall.Kill(postmaster, syscall.SIGSTOP)
	for _, child := range childrenOf(postmaster) {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
}

// killAndWait kills a process with SIGKILL and waits until it has exited,
// so that a postmaster's data directory and port are free for a restart.
func killAndWait(pid int) {
	_ = syscall.Kill(pid, syscall.SIGKILL)
	Poll(30*time.Second, 20*time.Millisecond, func() bool { return !running(pid) })
}

// Break makes the stopped node's PostgreSQL unable to start again
// without being rebuilt: its control file is gone.
func (n *Node) Break() error {
	return os.Remove(filepath.Join(n.dataDir, "global", "pg_control"))
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// postmasterPID is the pid of the running postmaster (or standalone
// backend), from its pid file, or 0.
func (n *Node) postmasterPID() int { return postmasterPIDIn(n.dataDir) }

// Partition cuts the node off the network (on) or heals it (off): its
// PostgreSQL cannot be reached by the services or the other nodes, and its
// Patroni cannot reach etcd.
func (n *Node) Partition(on bool) {
	n.Proxy.Blackhole(on)
	n.ReplProxy.Blackhole(on)
	n.EtcdProxy.Blackhole(on)
}

// SetReplicationLatency delays everything the nodes send each other by d,
// each way: the distance between data centres, or a busy network.
func (h *HA) SetReplicationLatency(d time.Duration) {
	for _, n := range h.Nodes {
		n.ReplProxy.SetLatency(d)
	}
}

// stop stops every node and etcd and removes the directory.
func (h *HA) stop() {
	for _, n := range h.Nodes {
		if n.cmd != nil {
			_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGTERM)
		}
	}
	for _, n := range h.Nodes {
		if n.cmd == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(20 * time.Second):
		}
		n.Kill()
		if h.t.Failed() {
			if b, err := os.ReadFile(n.logPath); err == nil {
				h.t.Logf("---- log of patroni %s ----\n%s", n.Name, tail(b, 60))
				if keep := os.Getenv("HA_KEEP_LOGS"); keep != "" {
					_ = os.WriteFile(filepath.Join(keep, filepath.Base(n.logPath)), b, 0o644)
				}
			}
		}
	}
	if h.etcd != nil {
		_ = syscall.Kill(-h.etcd.Process.Pid, syscall.SIGKILL)
		_ = h.etcd.Wait()
	}
	os.RemoveAll(h.dir)
}

// URL is a connection string for database on the cluster: every node, in
// order, and only the one that takes writes (target_session_attrs), with a
// short connect timeout so an unreachable node is passed over quickly.
func (h *HA) URL(database string) string {
	hosts := make([]string, len(h.Nodes))
	for i, n := range h.Nodes {
		hosts[i] = n.Proxy.Addr()
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/" + url.PathEscape(database) +
		"?target_session_attrs=read-write&connect_timeout=2"
}

// CreateDatabase creates a database on the cluster's primary.
func (h *HA) CreateDatabase(name string) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, h.URL("postgres"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		h.t.Fatal(err)
	}
}

// HAState is the cluster as Patroni reports it.
type HAState struct {
	Leader string
	// SyncStandby is the synchronous standby's name, if any.
	SyncStandby string
	// Streaming counts the replicas that run and replicate, as Patroni
	// reports them (which WaitHealthy does not trust).
	Streaming int
	Members   []HAMember
}

// HAMember is one member in Patroni's view.
type HAMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
	Lag      any    `json:"lag"`
}

// State asks any node's Patroni for the cluster's state.
func (h *HA) State() (HAState, error) {
	var last error
	for _, n := range h.Nodes {
		res, err := h.http.Get("http://" + n.apiAddr + "/cluster")
		if err != nil {
			last = err
			continue
		}
		var body struct {
			Members []HAMember `json:"members"`
		}
		err = json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if err != nil {
			last = err
			continue
		}
		var s HAState
		s.Members = body.Members
		for _, m := range body.Members {
			switch m.Role {
			case "leader":
				if m.State == "running" {
					s.Leader = m.Name
				}
			case "sync_standby":
				s.SyncStandby = m.Name
			}
			if m.Role != "leader" && (m.State == "running" || m.State == "streaming") {
				if lag, ok := m.Lag.(float64); ok && lag >= 0 {
					s.Streaming++
				}
			}
		}
		return s, nil
	}
	return HAState{}, last
}

// Node is the node named name.
func (h *HA) Node(name string) *Node {
	for _, n := range h.Nodes {
		if n.Name == name {
			return n
		}
	}
	h.t.Fatalf("no node %q", name)
	return nil
}

// Leader is the current leader node, waiting up to timeout for one.
func (h *HA) Leader(timeout time.Duration) *Node {
	h.t.Helper()
	s := h.Await(timeout, "a leader", func(s HAState) bool { return s.Leader != "" })
	return h.Node(s.Leader)
}

// WaitHealthy waits until the cluster has a leader and two replicas that
// stream from it and have caught up (the leader's pg_stat_replication:
// streaming, replayed to within caughtUp of its WAL), one of them the
// synchronous standby in synchronous mode. Patroni's own view is not
// enough: it reports a replica "running" that runs but does not stream
// (its replication slot not yet on a new leader, say), and the next fault
// would then find no replica close enough to the lost primary to take
// over (maximum_lag_on_failover).
//
// It mends, as an operator would, the ways a node fails to rejoin by
// itself on this Patroni (Debian's 3.0):
//   - a node whose Patroni process has exited is started again;
//   - a replica that for stuckAfter, while the cluster had a leader, has
//     been neither streaming from the leader nor being rebuilt is rebuilt
//     from the leader (patronictl reinit, see rebuild), and again each
//     further stuckAfter it is not. After an asynchronous
//     failover the old primary may hold WAL the new leader never had, and
//     a replica whose rewind could not reach the leader can be left
//     starting without a primary to follow (Patroni issue 3675), and a
//     postmaster this Patroni lost track of can keep the node's port:
//     none rejoins by itself.
//
// Rebuilt replicas are named in Reinitialized; what the services wrote
// lives on the leader, which a replica's rebuild does not touch.
func (h *HA) WaitHealthy(timeout time.Duration) HAState {
	h.t.Helper()
	const stuckAfter, restartEvery = 45 * time.Second, 10 * time.Second
	// down is when each replica was first seen neither streaming from the
	// leader nor being rebuilt, while there was a leader; a rebuild starts
	// its count again. restarted is when each Patroni was last started.
	down, restarted := map[string]time.Time{}, map[string]time.Time{}
	return h.Await(timeout, "a healthy cluster", func(s HAState) bool {
		for _, n := range h.Nodes {
			if n.cmd != nil && n.hasExited() && time.Since(restarted[n.Name]) > restartEvery {
				restarted[n.Name] = time.Now()
				h.t.Logf("%s's Patroni has exited; starting it again. Its log:\n%s", n.Name, n.logTail(40))
				n.Start()
			}
		}
		if s.Leader == "" {
			clear(down)
			return false
		}
		rows, err := h.Node(s.Leader).replication()
		if err != nil {
			return false
		}
		streaming, caught := map[string]bool{}, 0
		for _, r := range rows {
			streaming[r.Name] = r.State == "streaming"
			if r.caughtUp() {
				caught++
			}
		}
		if caught == 2 && (!h.Sync || s.SyncStandby != "") {
			return true
		}
		for _, n := range h.Nodes {
			state := "absent from the cluster"
			for _, m := range s.Members {
				if m.Name == n.Name {
					state = m.State
				}
			}
			// Streaming, if not yet caught up, or being rebuilt, a replica
			// is on its way. Connected in another state it may not be: a
			// replica that holds WAL the leader never had asks, for ever,
			// for a start point the leader has not reached.
			if n.Name == s.Leader || streaming[n.Name] || state == "creating replica" {
				delete(down, n.Name)
				continue
			}
			since, ok := down[n.Name]
			if !ok {
				down[n.Name] = time.Now()
				continue
			}
			if time.Since(since) < stuckAfter {
				continue
			}
			down[n.Name] = time.Now()
			h.t.Logf("%s (%s) has not replicated from %s for %s; rebuilding it from %s. Its log:\n%s",
				n.Name, state, s.Leader, stuckAfter, s.Leader, n.logTail(80))
			h.rebuild(n)
		}
		return false
	})
}

// rebuild has Patroni rebuild the replica n from the leader (patronictl
// reinit), and names it in Reinitialized when Patroni takes the request.
// A postmaster still running on the node's data directory that its
// postmaster.pid does not name is killed first: demoting a primary cut off
// the network, this Patroni can start a second postmaster and lose track
// of one, which keeps the node's port, so the rebuilt node could not
// listen. (Killed only here, where the node's data is about to be
// replaced: a postmaster killed on a node that is to rejoin is a crashed
// primary or replica, whose crash recovery, as this Patroni runs it, can
// leave it with WAL the leader never had.)
func (h *HA) rebuild(n *Node) {
	if stray := n.strayPostmasters(); len(stray) > 0 {
		h.t.Logf("killing %s's stray postmasters %v first", n.Name, stray)
		for _, pid := range stray {
			freeze(pid)
			killAndWait(pid)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "patronictl", "-c", n.config, "reinit", "--force", haScope, n.Name).CombinedOutput()
	if err != nil {
		h.t.Logf("patronictl reinit %s: %v\n%s", n.Name, err, out)
		return
	}
	h.Reinitialized = append(h.Reinitialized, n.Name)
}

// caughtUp is how far behind the leader's WAL a replica may have replayed
// and still count as caught up: Patroni's maximum_lag_on_failover.
const caughtUp = 1 << 20

// replica is one row of a node's pg_stat_replication.
type replica struct {
	Name, State string
	// Lag is how many bytes of the node's WAL the replica has not yet
	// replayed (nil before it reports).
	Lag *int64
}

// caughtUp says whether the replica streams and has replayed to within
// caughtUp bytes of the primary's WAL.
func (r replica) caughtUp() bool {
	return r.State == "streaming" && r.Lag != nil && *r.Lag < caughtUp
}

// replication reads the node's pg_stat_replication, straight from its
// PostgreSQL (not through the proxies the faults act on).
func (n *Node) replication() ([]replica, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://postgres@"+n.pgAddr+"/postgres?sslmode=disable&connect_timeout=2")
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT application_name, state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint
		FROM pg_stat_replication ORDER BY application_name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (replica, error) {
		var r replica
		err := row.Scan(&r.Name, &r.State, &r.Lag)
		return r, err
	})
}

// strayPostmasters are the postmasters whose command line names the
// node's data directory, but which its postmaster.pid does not name
// (standalone backends, postgres --single, are not postmasters).
func (n *Node) strayPostmasters() []int {
	current := n.postmasterPID()
	entries, _ := os.ReadDir("/proc")
	var stray []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == current {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if filepath.Base(args[0]) != "postgres" || slices.Contains(args, "--single") {
			continue
		}
		for i := 1; i < len(args)-1; i++ {
			if args[i] == "-D" && filepath.Clean(args[i+1]) == filepath.Clean(n.dataDir) {
				stray = append(stray, pid)
				break
			}
		}
	}
	return stray
}

// running says whether the process exists and has not exited (a zombie
// waiting for its parent has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	return len(fields) > 0 && fields[0] != "Z"
}

// hasExited says whether the node's Patroni process has exited.
func (n *Node) hasExited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// logTail is the end of the node's Patroni log (PostgreSQL's own lines
// included), lines long.
func (n *Node) logTail(lines int) string {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return err.Error()
	}
	return tail(b, lines)
}

// Await polls the cluster's state until ok holds, failing the test after
// timeout with what was awaited and every node's log.
func (h *HA) Await(timeout time.Duration, what string, ok func(HAState) bool) HAState {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s, err := h.State()
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no %s within %s. %s", what, timeout, h.Describe())
		}
		time.Sleep(200 * time.Millisecond) // polling with a deadline
	}
}

// Describe is the cluster's state as Patroni reports it and the end of
// every node's log: taken while etcd still runs, since at cleanup the
// logs end in the noise of the shutdown.
func (h *HA) Describe() string {
	var b strings.Builder
	if s, err := h.State(); err != nil {
		fmt.Fprintf(&b, "The cluster's state is unknown: %v.", err)
	} else {
		fmt.Fprintf(&b, "The cluster: leader %q, synchronous standby %q, %d replicas replicating by Patroni's count; members:", s.Leader, s.SyncStandby, s.Streaming)
		for _, m := range s.Members {
			lag := fmt.Sprint(m.Lag)
			if n, ok := m.Lag.(float64); ok {
				lag = strconv.FormatFloat(n, 'f', 0, 64) + " bytes"
			}
			fmt.Fprintf(&b, " %s %s %s (timeline %d, lag %s);", m.Name, m.Role, m.State, m.Timeline, lag)
		}
	}
	for _, n := range h.Nodes {
		if rows, err := n.replication(); err == nil && len(rows) > 0 {
			fmt.Fprintf(&b, " %s's replicas:", n.Name)
			for _, r := range rows {
				lag := "unknown"
				if r.Lag != nil {
					lag = strconv.FormatInt(*r.Lag, 10) + " bytes"
				}
				fmt.Fprintf(&b, " %s %s (replay lag %s);", r.Name, r.State, lag)
			}
		}
	}
	for _, n := range h.Nodes {
		fmt.Fprintf(&b, "\n---- %s's log ----\n%s", n.Name, n.logTail(120))
	}
	return b.String()
}

// Switchover hands the leadership to candidate cleanly (patronictl).
func (h *HA) Switchover(leader, candidate *Node) {
	h.t.Helper()
	out, err := exec.Command("patronictl", "-c", leader.config, "switchover", "--leader", leader.Name,
		"--candidate", candidate.Name, "--force", haScope).CombinedOutput()
	if err != nil {
		h.t.Fatalf("patronictl switchover: %v\n%s", err, out)
	}
}
