package shard

// ShareIDs makes r use prev's global id generator when both have the same
// node number, so that ids made by rules a configuration reload replaced
// and by their successor never repeat (a fresh generator would restart
// its sequence within the same millisecond). Call it before r is shared.
func (r *Rules) ShareIDs(prev *Rules) {
	if prev != nil && prev.ids.node == r.ids.node {
		r.ids = prev.ids
	}
}
