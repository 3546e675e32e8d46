//go:build !failpoint

package failpoint

// Hit does nothing: the binary was built without the failpoint tag.
func Hit(string) {}

// Enabled reports whether the binary honours SLUICE_FAILPOINT.
const Enabled = false
