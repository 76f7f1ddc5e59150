package harness

import "sync"

// UnderKills runs jobs 0 to n-1 on workers goroutines, do(worker, job)
// each, and calls kill after every killEvery jobs done since the last
// kill, rounds times, none of them on a clock: the kills fall among the
// jobs at every stage. Job j starts only after kill j/killEvery - 1, so
// the jobs run on across every kill and do not run out before the last
// one (n must be at least (rounds + 2) × killEvery). It returns once every
// job is done.
func UnderKills(n, workers, rounds, killEvery int, do func(worker, job int), kill func()) {
	done := make(chan struct{}, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				do(w, j)
				done <- struct{}{}
			}
		}()
	}
	killed := make([]chan struct{}, rounds+1)
	for k := range killed {
		killed[k] = make(chan struct{})
	}
	close(killed[0])
	go func() {
		for j := range n {
			<-killed[min(rounds, max(0, j/killEvery-1))]
			work <- j
		}
		close(work)
	}()
	for k := range rounds {
		for range killEvery {
			<-done
		}
		kill()
		close(killed[k+1])
		// The next kill counts the jobs done after this one.
		for drained := false; !drained; {
			select {
			case <-done:
			default:
				drained = true
			}
		}
	}
	wg.Wait()
}
