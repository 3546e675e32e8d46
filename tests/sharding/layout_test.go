package sharding

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-proxy/sluice/sandbox"
)

// rule is one [[shard]] rule of the test configuration together with the
// columns of its table, so the same value writes the TOML, creates the
// physical tables and checks where rows are.
type rule struct {
	schema, table, key string
	algo               string // mod | hash | range | date
	clusters           []string
	tables             int // tables_per_cluster
	boundaries         []int64
	dateUnit           string
	idColumn           string
	columns            string // the column list of CREATE TABLE, without parentheses
}

// shards is P, the number of physical tables.
func (r *rule) shards() int { return len(r.clusters) * r.tables }

// physical is the name of shard s's table.
func (r *rule) physical(s int) string {
	if r.tables == 1 {
		return r.table
	}
	return r.table + "_" + strconv.Itoa(s%r.tables)
}

// cluster is the name of the cluster holding shard s.
func (r *rule) cluster(s int) string { return r.clusters[s/r.tables] }

// shardOf is the shard the rule puts key (in the text form the server prints)
// on, or -1 for hash, whose function the test does not restate: rows of
// hash rules are checked for consistency only (one key, one place).
func (r *rule) shardOf(key string) (int, error) {
	p := int64(r.shards())
	switch r.algo {
	case "mod":
		k, err := strconv.ParseInt(key, 10, 64)
		if err != nil || k < 0 {
			return 0, fmt.Errorf("%s.%s: key %q is not a non-negative integer", r.schema, r.table, key)
		}
		return int(k % p), nil
	case "range":
		k, err := strconv.ParseInt(key, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s.%s: key %q is not an integer", r.schema, r.table, key)
		}
		for i := 0; i+1 < len(r.boundaries); i++ {
			if k >= r.boundaries[i] && k < r.boundaries[i+1] {
				return i, nil
			}
		}
		return 0, fmt.Errorf("%s.%s: key %d is outside every range", r.schema, r.table, k)
	case "date":
		d, err := time.Parse(time.DateOnly, key[:min(len(key), 10)])
		if err != nil {
			return 0, fmt.Errorf("%s.%s: key %q is not a date", r.schema, r.table, key)
		}
		var n int64
		switch r.dateUnit {
		case "day":
			n = d.Unix() / 86400
		case "month":
			n = int64(d.Year())*12 + int64(d.Month()) - 1
		case "year":
			n = int64(d.Year())
		}
		return int(n % p), nil
	}
	return -1, nil
}

// toml is the rule's [[shard]] table.
func (r *rule) toml() string {
	var b strings.Builder
	q := make([]string, len(r.clusters))
	for i, c := range r.clusters {
		q[i] = strconv.Quote(c)
	}
	fmt.Fprintf(&b, "[[shard]]\nschema = %q\ntable = %q\nkey = %q\nalgorithm = %q\nclusters = [%s]\ntables_per_cluster = %d\n",
		r.schema, r.table, r.key, r.algo, strings.Join(q, ", "), r.tables)
	if len(r.boundaries) > 0 {
		s := make([]string, len(r.boundaries))
		for i, v := range r.boundaries {
			s[i] = strconv.FormatInt(v, 10)
		}
		fmt.Fprintf(&b, "boundaries = [%s]\n", strings.Join(s, ", "))
	}
	if r.dateUnit != "" {
		fmt.Fprintf(&b, "date_unit = %q\n", r.dateUnit)
	}
	if r.idColumn != "" {
		fmt.Fprintf(&b, "id_column = %q\n", r.idColumn)
	}
	return b.String() + "\n"
}

// Table columns, shared by the physical tables and the reference's logical ones.
const (
	ordersColumns = "uid BIGINT NOT NULL, order_id BIGINT NOT NULL, amount DECIMAL(12,2) NOT NULL, " +
		"status VARCHAR(16) NOT NULL, country CHAR(2) NOT NULL, note VARCHAR(64) NULL, PRIMARY KEY (order_id), KEY (uid)"
	itemsColumns     = "item_id BIGINT NOT NULL PRIMARY KEY, sku VARCHAR(32) NOT NULL, qty INT NOT NULL, price DECIMAL(10,2) NULL"
	eventsColumns    = "eid BIGINT NOT NULL PRIMARY KEY, uid BIGINT NOT NULL, kind VARCHAR(16) NOT NULL, val INT NULL"
	logsColumns      = "lid BIGINT NOT NULL PRIMARY KEY, day DATE NOT NULL, level TINYINT NOT NULL, msg VARCHAR(64) NOT NULL"
	countriesColumns = "code CHAR(2) NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL, region VARCHAR(16) NOT NULL"
	notesColumns     = "id INT NOT NULL PRIMARY KEY, body VARCHAR(64) NOT NULL, n INT NOT NULL"
)

// Schemas: the differential test owns diffSchema (its data must match the
// reference's); every other test works in appSchema.
const (
	diffSchema = "shd"
	appSchema  = "app"
)

// eventsEnd is the end of the last range of the events rule.
const eventsEnd = 4000

// clusterNames are the two clusters of the shared setup, in config order.
var clusterNames = []string{"c1", "c2"}

// defaultCluster holds the unsharded table (not the first cluster, so a
// statement that falls back to the first cluster instead shows).
const defaultCluster = "c2"

// rulesFor returns the shard rules of one schema: orders by uid mod over
// both clusters x 4 tables with a global id column, items by a hash of
// item_id, events by ranges of eid, logs by the month of day.
func rulesFor(schema string) []*rule {
	return []*rule{
		{schema: schema, table: "orders", key: "uid", algo: "mod", clusters: clusterNames, tables: 4,
			idColumn: "order_id", columns: ordersColumns},
		{schema: schema, table: "items", key: "item_id", algo: "hash", clusters: clusterNames, tables: 2,
			columns: itemsColumns},
		{schema: schema, table: "events", key: "eid", algo: "range", clusters: clusterNames, tables: 2,
			boundaries: []int64{0, 1000, 2000, 3000, eventsEnd}, columns: eventsColumns},
		{schema: schema, table: "logs", key: "day", algo: "date", dateUnit: "month", clusters: clusterNames, tables: 3,
			columns: logsColumns},
	}
}

// ghostRule is a rule whose physical tables are never created: statements
// on it must get the server's 1146 naming the physical table.
var ghostRule = &rule{schema: appSchema, table: "ghost", key: "id", algo: "mod", clusters: clusterNames, tables: 2,
	columns: "id BIGINT NOT NULL PRIMARY KEY"}

// allRules are every rule of the shared configuration whose tables exist.
func allRules() []*rule {
	return append(rulesFor(diffSchema), rulesFor(appSchema)...)
}

// shardingTOML is the [sharding], [[shard]] and [[broadcast]] part of the
// shared configuration; shardingKeys are more lines for [sharding].
func shardingTOML(shardingKeys ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[sharding]\ndefault_cluster = %q\nnode_id = %d\n", defaultCluster, testNodeID)
	for _, k := range shardingKeys {
		b.WriteString(k + "\n")
	}
	b.WriteString("\n")
	for _, r := range append(allRules(), ghostRule) {
		b.WriteString(r.toml())
	}
	for _, s := range []string{diffSchema, appSchema} {
		fmt.Fprintf(&b, "[[broadcast]]\nschema = %q\ntable = \"countries\"\n\n", s)
	}
	return b.String()
}

// testNodeID is [sharding] node_id of the shared sluice; global ids carry it.
const testNodeID = 3

// createLayout creates, on every cluster master, both schemas with each
// rule's physical tables, the broadcast table, and on the default cluster
// the unsharded table; on the reference it creates the differential
// schema's logical tables.
func createLayout(ctx context.Context, clusters map[string]*sandbox.Topology, ref *sandbox.Server) error {
	for name, topo := range clusters {
		stmts := []string{}
		for _, s := range []string{diffSchema, appSchema} {
			stmts = append(stmts, "CREATE DATABASE IF NOT EXISTS "+s,
				"CREATE TABLE "+s+".countries ("+countriesColumns+")")
			if name == defaultCluster {
				stmts = append(stmts, "CREATE TABLE "+s+".notes ("+notesColumns+")")
			}
		}
		for _, r := range allRules() {
			for s := range r.shards() {
				if r.cluster(s) == name {
					stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.physical(s), r.columns))
				}
			}
		}
		if err := topo.Master.Exec(ctx, stmts...); err != nil {
			return err
		}
	}
	stmts := []string{"CREATE DATABASE IF NOT EXISTS " + diffSchema,
		"CREATE TABLE " + diffSchema + ".countries (" + countriesColumns + ")",
		"CREATE TABLE " + diffSchema + ".notes (" + notesColumns + ")"}
	for _, r := range rulesFor(diffSchema) {
		stmts = append(stmts, fmt.Sprintf("CREATE TABLE %s.%s (%s)", r.schema, r.table, r.columns))
	}
	return ref.Exec(ctx, stmts...)
}

// placement is where the checker found one row.
type placement struct {
	cluster, table string
}

// checkPlacement reads every physical table of every rule on every cluster
// master and returns one problem per row that is not where its rule says
// (for hash rules: a key found in two places), and the number of rows read
// per rule ("schema.table"). clusters maps the rule's cluster names to their
// topologies.
func checkPlacement(ctx context.Context, rules []*rule, clusters map[string]*sandbox.Topology) (problems []string, rows map[string]int, err error) {
	rows = map[string]int{}
	for _, r := range rules {
		seen := map[string]placement{}
		for s := range r.shards() {
			topo := clusters[r.cluster(s)]
			db, err := topo.Master.RootDB()
			if err != nil {
				return nil, nil, err
			}
			keys, err := readKeys(ctx, db, r, s)
			if err != nil {
				return nil, nil, err
			}
			here := placement{r.cluster(s), r.physical(s)}
			for _, k := range keys {
				rows[r.schema+"."+r.table]++
				want, err := r.shardOf(k)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s.%s on %s: %v", r.schema, here.table, here.cluster, err))
					continue
				}
				if want >= 0 && want != s {
					problems = append(problems, fmt.Sprintf("%s.%s: %s = %s is on cluster %s table %s; the rule says cluster %s table %s (shard %d)",
						r.schema, r.table, r.key, k, here.cluster, here.table, r.cluster(want), r.physical(want), want))
				}
				if prev, ok := seen[k]; ok && prev != here {
					problems = append(problems, fmt.Sprintf("%s.%s: %s = %s is both on cluster %s table %s and on cluster %s table %s",
						r.schema, r.table, r.key, k, prev.cluster, prev.table, here.cluster, here.table))
				}
				seen[k] = here
			}
		}
	}
	return problems, rows, nil
}

// readKeys returns the key column of every row of shard s's table, in the
// server's text form.
func readKeys(ctx context.Context, db *sql.DB, r *rule, s int) ([]string, error) {
	q := fmt.Sprintf("SELECT CAST(`%s` AS CHAR) FROM `%s`.`%s`", r.key, r.schema, r.physical(s))
	res, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", q, r.cluster(s), err)
	}
	defer res.Close()
	var keys []string
	for res.Next() {
		var k string
		if err := res.Scan(&k); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, res.Err()
}
