#!/usr/bin/env bash
# A self-check machine's session with the SIP2 door of `make run`, byte for
# byte: the kiosk logs in, asks the door's status, checks a book out to
# Dave (1004), shows Dave his items out and his allowance, renews his book,
# tries a book for Erin (1005, whose card is blocked), checks Dave's book
# in again, then one of Grace's (1007) that Bob waits for, which the door
# says to set aside for the hold shelf here (CV01), and ends the session. Dave gives his PIN (AD) with patron information: with it
# the door shows his name and loans. Each message carries error
# detection (AY sequence number, AZ checksum). Lines starting ">" are sent,
# "<" received; a message's CR is not shown.
#
#   scripts/sip2-session.sh [HOST:PORT]     (default 127.0.0.1:6443)
set -euo pipefail
addr="${1:-127.0.0.1:6443}"
exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"
seq=0

# checksum: the two's complement of the 16-bit sum of the bytes, in hex.
checksum() {
  local sum=0 b
  for b in $(printf '%s' "$1" | od -An -tu1 -v); do sum=$((sum + b)); done
  printf '%04X' $(((-sum) & 0xFFFF))
}

send() {
  local msg="$1AY${seq}AZ" reply
  msg="$msg$(checksum "$msg")"
  seq=$(((seq + 1) % 10))
  printf '%s\r' "$msg" >&3
  IFS= read -r -d $'\r' -t 30 reply <&3
  printf '> %s\n< %s\n' "$msg" "$reply"
}

now() { date -u +'%Y%m%d    %H%M%S'; }

send "9300CNkiosk|COkiosk-demo|CPkiosk-1|"
send "9900302.00"
send "11YN$(now)$(now)AOdiku|AA1004|ABbook-101|AC|"
send "63001$(now)  Y       AOdiku|AA1004|AD4711|"
send "29NN$(now)$(now)AOdiku|AA1004|ABbook-101|"
send "11YN$(now)$(now)AOdiku|AA1005|ABbook-102|AC|"
send "09N$(now)$(now)APkiosk-1|AOdiku|ABbook-101|AC|"
send "09N$(now)$(now)APkiosk-1|AOdiku|ABbook-153|AC|"
send "35$(now)AOdiku|AA1004|"
