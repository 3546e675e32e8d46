//go:build failpoint

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Enabled reports whether the binary honours SLUICE_FAILPOINT.
const Enabled = true

var (
	mu     sync.Mutex
	hits   = map[string]int{}
	armed  map[string]int // name -> the hit that kills (1 for a bare name)
	loaded bool
)

func load() {
	armed = map[string]int{}
	for _, f := range strings.Split(os.Getenv("SLUICE_FAILPOINT"), ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n := 1
		if name, count, ok := strings.Cut(f, "#"); ok {
			if c, err := strconv.Atoi(count); err == nil && c > 0 {
				f, n = name, c
			}
		}
		armed[f] = n
	}
	loaded = true
}

// Hit kills the process with SIGKILL when name is armed for this hit; it first writes a line
// naming the point to stderr so a test can tell where the process died.
func Hit(name string) {
	mu.Lock()
	if !loaded {
		load()
	}
	hits[name]++
	n, ok := armed[name]
	kill := ok && hits[name] == n
	mu.Unlock()
	if !kill {
		return
	}
	fmt.Fprintf(os.Stderr, "failpoint: %s#%d: killing the process\n", name, n)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
