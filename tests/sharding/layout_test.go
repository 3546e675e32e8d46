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
	options            string // table options after the column list (e.g. a default charset)
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
	// peopleColumns hold one text column per collation the merges must
	// honour: the key name (utf8mb4_general_ci, where every emoji weighs
	// the same), city in the table's default latin1_swedish_ci, title in
	// utf8mb4_unicode_ci, code in utf8mb4_bin (PAD SPACE: 'a' = 'a '), an
	// ENUM whose positions do not follow its text, a SET, and a DOUBLE.
	peopleColumns = "pid BIGINT NOT NULL PRIMARY KEY, " +
		"name VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, " +
		"city VARCHAR(32) NOT NULL, " +
		"title VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci NULL, " +
		"code VARCHAR(16) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL, " +
		"mood ENUM('zeta','alpha','mid','','Beta') NOT NULL, perks SET('x','b','a') NOT NULL, " +
		"score DOUBLE NULL, qty INT NOT NULL, cc CHAR(2) NOT NULL, KEY (name)"
	peopleOptions = "DEFAULT CHARSET=latin1"
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
// item_id, events by ranges of eid, logs by the month of day, people by a
// hash of a utf8mb4_general_ci name.
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
		{schema: schema, table: "people", key: "name", algo: "hash", clusters: clusterNames, tables: 2,
			columns: peopleColumns, options: peopleOptions},
	}
}

// createSQL is the CREATE TABLE of schema.table with r's columns and options.
func (r *rule) createSQL(table string) string {
	return strings.TrimSpace(fmt.Sprintf("CREATE TABLE %s.%s (%s) %s", r.schema, table, r.columns, r.options))
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
					stmts = append(stmts, r.createSQL(r.physical(s)))
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
		stmts = append(stmts, r.createSQL(r.table))
	}
	return ref.Exec(ctx, stmts...)
}

// placement is where the checker found one row.
type placement struct {
	cluster, table string
}

// checkPlacement reads every physical table of every rule on every cluster
// master and returns one problem per row that is not where its rule says
// (for hash rules: a key found in two places, where keys that the column's
// collation holds equal, such as 'Anna' and 'anna ', count as one key), and
// the number of rows read per rule ("schema.table"). clusters maps the
// rule's cluster names to their topologies. With byCollation false, hash
// keys are one key only when their text is the same.
func checkPlacement(ctx context.Context, rules []*rule, clusters map[string]*sandbox.Topology, byCollation bool) (problems []string, rows map[string]int, err error) {
	rows = map[string]int{}
	for _, r := range rules {
		seen := map[string]placement{}
		spelled := map[string]string{} // identity -> the first spelling met
		for s := range r.shards() {
			topo := clusters[r.cluster(s)]
			db, err := topo.Master.RootDB()
			if err != nil {
				return nil, nil, err
			}
			keys, err := readKeys(ctx, db, r, s, byCollation)
			if err != nil {
				return nil, nil, err
			}
			here := placement{r.cluster(s), r.physical(s)}
			for _, k := range keys {
				rows[r.schema+"."+r.table]++
				want, err := r.shardOf(k.text)
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s.%s on %s: %v", r.schema, here.table, here.cluster, err))
					continue
				}
				if want >= 0 && want != s {
					problems = append(problems, fmt.Sprintf("%s.%s: %s = %s is on cluster %s table %s; the rule says cluster %s table %s (shard %d)",
						r.schema, r.table, r.key, k.text, here.cluster, here.table, r.cluster(want), r.physical(want), want))
				}
				if prev, ok := seen[k.id]; ok && prev != here {
					what := fmt.Sprintf("%s = %s", r.key, k.text)
					if first := spelled[k.id]; first != k.text {
						what = fmt.Sprintf("%s = %q (equal to %q under the column's collation)", r.key, k.text, first)
					}
					problems = append(problems, fmt.Sprintf("%s.%s: %s is both on cluster %s table %s and on cluster %s table %s",
						r.schema, r.table, what, prev.cluster, prev.table, here.cluster, here.table))
				}
				if _, ok := spelled[k.id]; !ok {
					spelled[k.id] = k.text
				}
				seen[k.id] = here
			}
		}
	}
	return problems, rows, nil
}

// storedKey is one row's shard key: its text as the server prints it, and
// the identity under which two rows hold the same key.
type storedKey struct {
	text, id string
}

// readKeys returns the key column of every row of shard s's table. For a
// hash rule (when byCollation) the identity is the server's collation weight of the key
// without trailing spaces (every text key of the tests has a PAD SPACE
// collation), so the server, not Go, says which keys are equal; for the
// other rules it is the text.
func readKeys(ctx context.Context, db *sql.DB, r *rule, s int, byCollation bool) ([]storedKey, error) {
	id := "NULL"
	if r.algo == "hash" && byCollation {
		id = fmt.Sprintf("HEX(WEIGHT_STRING(RTRIM(`%s`)))", r.key)
	}
	q := fmt.Sprintf("SELECT CAST(`%s` AS CHAR), %s FROM `%s`.`%s`", r.key, id, r.schema, r.physical(s))
	res, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s on %s: %w", q, r.cluster(s), err)
	}
	defer res.Close()
	var keys []storedKey
	for res.Next() {
		var k storedKey
		var w sql.NullString
		if err := res.Scan(&k.text, &w); err != nil {
			return nil, err
		}
		k.id = k.text
		if w.Valid {
			k.id = w.String
		}
		keys = append(keys, k)
	}
	return keys, res.Err()
}
