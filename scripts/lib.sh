# Shared by the demo's scripts (sourced, not run).

# url_of turns a listen address (":8080", "0.0.0.0:8080", "host:8080") into
# the URL to reach it from here.
url_of() {
  local host="${1%:*}" port="${1##*:}"
  case "$host" in ""|0.0.0.0|"[::]") host=127.0.0.1 ;; esac
  echo "http://$host:$port"
}
