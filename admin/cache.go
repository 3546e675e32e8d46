package admin

import (
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/cache"
	"github.com/sluice-proxy/sluice/internal/mono"
)

// showCacheTop is how many entries SHOW CACHE lists without LIMIT.
const showCacheTop = 20

// ShowCache builds SHOW CACHE: one summary row (kind "summary") with the
// cache's counters, then its most hit entries (kind "entry"), at most
// limit of them (-1: showCacheTop).
func ShowCache(c *cache.Cache, limit int) *Table {
	r := &Table{Columns: []string{"kind", "digest", "tables", "hits", "misses", "stores", "refused", "evictions",
		"invalidations", "entries", "bytes", "max_memory", "ttl_left"}}
	st := c.Stats()
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	r.Rows = append(r.Rows, []string{"summary", "", strconv.Itoa(st.Tables) + " tables tracked", u(st.Hits), u(st.Misses),
		u(st.Stores), u(st.Refused), u(st.Evictions), u(st.Invalidations), strconv.Itoa(st.Entries),
		strconv.FormatInt(st.Bytes, 10), strconv.FormatInt(st.MaxMemory, 10), ""})
	if limit < 0 {
		limit = showCacheTop
	}
	for _, e := range c.Top(limit, int64(mono.Now())) {
		r.Rows = append(r.Rows, []string{"entry", e.Digest, strings.Join(e.Tables, ","), u(e.Hits), "", "", "", "", "", "",
			strconv.FormatInt(e.Bytes, 10), "", e.TTL.Round(1e6).String()})
	}
	return r
}

// flushCache runs FLUSH CACHE [schema.table] and words its OK's info.
func flushCache(a *session, c *cache.Cache, schema, table string) string {
	var n int
	if schema == "" {
		n = c.Flush()
	} else {
		n = c.Drop(schema, table)
	}
	a.log.Info("admin: flush cache", zap.String("schema", schema), zap.String("table", table), zap.Int("dropped", n))
	return strconv.Itoa(n) + " entries dropped"
}
