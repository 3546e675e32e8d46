package sharding

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// stmt is one generated statement: its text with ? markers and the
// arguments, whether its result order is defined (a total ORDER BY), and
// whether it writes (compared by affected rows).
type stmt struct {
	sql     string
	args    []any
	ordered bool
	write   bool
	// cat is the workload category the statement belongs to (see
	// categories), for SLUICE_SHARD_ONLY and the per-category counts.
	cat string
	// tag, when set, names a documented refusal: sluice may answer the
	// statement with refusal (the tag's error code) whatever the reference
	// says; the comparison counts these per tag. answerable marks a tagged
	// statement that an exact sluice can answer (it reaches one shard): a
	// tag whose answerable statements are all refused fails the test.
	tag        string
	answerable bool
	// afterPrev: compare only when the statement before it was not
	// refused (it reads what that one set, e.g. SELECT ... INTO @v).
	afterPrev bool
	// types: compare column type names and decimal sizes as well.
	types bool
	// session is the SET in effect for the statement (in an episode), for messages.
	session string
	// colls maps result columns whose spelling the server may take from
	// any row of a group (GROUP BY, DISTINCT, MIN/MAX over a text column)
	// to their collation: those columns compare by the reference server's
	// collation weight, not by bytes.
	colls map[int]string
}

func (s stmt) String() string {
	if len(s.args) == 0 {
		return s.sql
	}
	return fmt.Sprintf("%s  args %v", s.sql, s.args)
}

// Key spaces of the generated data.
const (
	uidSpace    = 400  // orders.uid in [0, uidSpace)
	itemSpace   = 1000 // items.item_id of the loaded rows in [0, itemSpace)
	notesSpace  = 200
	firstDay    = "2025-01-01"
	daySpan     = 730 // logs.day in [firstDay, firstDay + daySpan days)
	loadOrders  = 2000
	loadItems   = 500
	loadEvents  = 800
	loadLogs    = 600
	loadNotes   = 60
	loadBatch   = 50
	idFirstLoad = 1_000_000 // first order_id / lid of loaded rows
)

var (
	statuses  = []string{"new", "paid", "shipped", "refunded", "void"}
	kinds     = []string{"click", "view", "buy", "sell"}
	countries = []struct{ code, name, region string }{
		{"DE", "Germany", "eu"}, {"FR", "France", "eu"}, {"IT", "Italy", "eu"}, {"ES", "Spain", "eu"},
		{"US", "United States", "am"}, {"CA", "Canada", "am"}, {"BR", "Brazil", "am"}, {"MX", "Mexico", "am"},
		{"JP", "Japan", "as"}, {"CN", "China", "as"}, {"IN", "India", "as"}, {"KR", "Korea", "as"},
		{"AU", "Australia", "oc"}, {"NZ", "New Zealand", "oc"}, {"ZA", "South Africa", "af"}, {"EG", "Egypt", "af"},
	}
)

// gen makes the data and the workload of one differential run; the same
// seed gives the same statements.
type gen struct {
	r                        *rand.Rand
	nextOrder, nextItem      int64
	nextEvent, nextLog, note int64
	nextPid                  int64
	usedEvents               map[int64]bool
	people                   []person // rows written by the generator or read back
	// only are the enabled categories (nil: all); baseMode is the
	// sessions' sql_mode, which mode episodes extend and restore.
	only     map[string]bool
	baseMode string
	// queue holds the rest of an episode (statements that must run in
	// order in one session).
	queue []stmt
}

func newGen(seed uint64) *gen {
	return &gen{r: rand.New(rand.NewPCG(seed, seed^0x5eed)), nextOrder: idFirstLoad, nextItem: itemSpace,
		nextLog: idFirstLoad, note: notesSpace, usedEvents: map[int64]bool{}}
}

func (g *gen) pick(list []string) string { return list[g.r.IntN(len(list))] }
func (g *gen) uid() int64                { return g.r.Int64N(uidSpace) }
func (g *gen) amount() string            { return fmt.Sprintf("%d.%02d", g.r.IntN(1000), g.r.IntN(100)) }
func (g *gen) day() string {
	d, _ := time.Parse(time.DateOnly, firstDay)
	return d.AddDate(0, 0, g.r.IntN(daySpan)).Format(time.DateOnly)
}
func (g *gen) eid() int64 { return g.r.Int64N(eventsEnd) }

// itemKey is mostly a key of the loaded range (half of which exist), now
// and then one of the rows the workload added.
func (g *gen) itemKey() int64 {
	if g.r.IntN(4) == 0 {
		return g.r.Int64N(g.nextItem + 1)
	}
	return g.r.Int64N(itemSpace)
}

// newEvent is an event id no row had yet (ranges are the whole key space,
// so ids are drawn at random and never reused).
func (g *gen) newEvent() int64 {
	for {
		k := g.eid()
		if !g.usedEvents[k] {
			g.usedEvents[k] = true
			return k
		}
	}
}

// orderRow is the values of one orders row in column order.
func (g *gen) orderRow() []any {
	g.nextOrder++
	var note any
	if g.r.IntN(4) > 0 {
		note = fmt.Sprintf("n%d", g.r.IntN(50))
	}
	return []any{g.uid(), g.nextOrder, g.amount(), g.pick(statuses), countries[g.r.IntN(len(countries))].code, note}
}

func (g *gen) itemRow(id int64) []any {
	var price any
	if g.r.IntN(5) > 0 {
		price = fmt.Sprintf("%d.%02d", g.r.IntN(200), g.r.IntN(100))
	}
	return []any{id, fmt.Sprintf("sku-%d", g.r.IntN(100)), g.r.IntN(20), price}
}

func (g *gen) eventRow() []any {
	var val any
	if g.r.IntN(6) > 0 {
		val = g.r.IntN(500)
	}
	return []any{g.newEvent(), g.uid(), g.pick(kinds), val}
}

func (g *gen) logRow() []any {
	g.nextLog++
	return []any{g.nextLog, g.day(), g.r.IntN(5), fmt.Sprintf("m%d", g.r.IntN(30))}
}

// insert builds a multi-row INSERT of rows into table's columns.
func insert(table, columns string, rows [][]any) stmt {
	n := strings.Count(columns, ",") + 1
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
	var args []any
	for _, r := range rows {
		args = append(args, r...)
	}
	return stmt{sql: "INSERT INTO " + table + " (" + columns + ") VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", len(rows)), ", "),
		args: args, write: true}
}

const (
	ordersInsertCols = "uid, order_id, amount, status, country, note"
	itemsInsertCols  = "item_id, sku, qty, price"
	eventsInsertCols = "eid, uid, kind, val"
	logsInsertCols   = "lid, day, level, msg"
)

// load returns the INSERTs of the initial data set, in batches.
func (g *gen) load() []stmt {
	var out []stmt
	batch := func(table, cols string, n int, row func(i int) []any) {
		for i := 0; i < n; i += loadBatch {
			var rows [][]any
			for j := i; j < min(n, i+loadBatch); j++ {
				rows = append(rows, row(j))
			}
			out = append(out, insert(table, cols, rows))
		}
	}
	var cs [][]any
	for _, c := range countries {
		cs = append(cs, []any{c.code, c.name, c.region})
	}
	out = append(out, insert("countries", "code, name, region", cs))
	batch("orders", ordersInsertCols, loadOrders, func(int) []any { return g.orderRow() })
	perm := g.r.Perm(itemSpace)
	batch("items", itemsInsertCols, loadItems, func(i int) []any { return g.itemRow(int64(perm[i])) })
	batch("events", eventsInsertCols, loadEvents, func(int) []any { return g.eventRow() })
	batch("logs", logsInsertCols, loadLogs, func(int) []any { return g.logRow() })
	batch("notes", "id, body, n", loadNotes, func(i int) []any {
		return []any{i * 3, fmt.Sprintf("b%d", g.r.IntN(10)), g.r.IntN(100)}
	})
	batch("people", peopleInsertCols, loadPeople, func(int) []any { return g.personRow() })
	return out
}

// oldStmt returns one random statement of the original workload (the
// "old" category).
func (g *gen) oldStmt() stmt {
	r := g.r
	u := g.uid
	switch r.IntN(46) {
	// orders (mod): point, IN, OR, range, aggregates, GROUP BY, ORDER BY/LIMIT, DISTINCT, joins.
	case 0, 1, 2:
		return stmt{sql: "SELECT order_id, uid, amount, status, country, note FROM orders WHERE uid = ?", args: []any{u()}}
	case 3:
		return stmt{sql: "SELECT * FROM orders WHERE uid = ? ORDER BY order_id", args: []any{u()}, ordered: true}
	case 4, 5:
		return stmt{sql: "SELECT order_id, amount FROM orders WHERE uid IN (?, ?, ?)", args: []any{u(), u(), u()}}
	case 6:
		return stmt{sql: "SELECT order_id, uid FROM orders WHERE uid = ? OR uid = ?", args: []any{u(), u()}}
	case 7:
		lo := u()
		return stmt{sql: "SELECT order_id, uid, amount FROM orders WHERE uid BETWEEN ? AND ? ORDER BY order_id",
			args: []any{lo, lo + r.Int64N(20)}, ordered: true}
	case 8:
		return stmt{sql: "SELECT COUNT(*), SUM(amount), MIN(amount), MAX(amount), AVG(amount) FROM orders"}
	case 9:
		return stmt{sql: "SELECT COUNT(*), SUM(amount), AVG(amount) FROM orders WHERE status = ?", args: []any{g.pick(statuses)}}
	case 10:
		return stmt{sql: "SELECT COUNT(*), MAX(order_id) FROM orders WHERE uid = ? AND status = ?", args: []any{u(), g.pick(statuses)}}
	case 11:
		return stmt{sql: "SELECT status, COUNT(*), SUM(amount), AVG(amount) FROM orders GROUP BY status"}
	case 12:
		return stmt{sql: "SELECT country, MAX(amount), MIN(order_id), COUNT(*) FROM orders WHERE amount > ? GROUP BY country ORDER BY country",
			args: []any{g.amount()}, ordered: true}
	case 13:
		return stmt{sql: fmt.Sprintf("SELECT order_id, uid, amount FROM orders ORDER BY amount DESC, order_id LIMIT %d OFFSET %d",
			1+r.IntN(20), r.IntN(50)), ordered: true}
	case 14:
		return stmt{sql: fmt.Sprintf("SELECT * FROM orders WHERE status = ? ORDER BY order_id LIMIT %d", 1+r.IntN(30)),
			args: []any{g.pick(statuses)}, ordered: true}
	case 15:
		return stmt{sql: fmt.Sprintf("SELECT order_id FROM orders ORDER BY uid, order_id DESC LIMIT %d, %d", r.IntN(40), 1+r.IntN(15)),
			ordered: true}
	case 16:
		return stmt{sql: "SELECT DISTINCT status FROM orders WHERE uid < ?", args: []any{u()}}
	case 17:
		return stmt{sql: "SELECT DISTINCT country FROM orders ORDER BY country", ordered: true}
	case 18:
		return stmt{sql: "SELECT o.order_id, c.name FROM orders o JOIN countries c ON c.code = o.country WHERE o.uid = ?", args: []any{u()}}
	case 19:
		return stmt{sql: "SELECT a.order_id, b.order_id FROM orders a JOIN orders b ON a.uid = b.uid WHERE a.uid = ?", args: []any{u()}}
	// orders writes
	case 20, 21:
		return insert("orders", ordersInsertCols, [][]any{g.orderRow()})
	case 22:
		rows := make([][]any, 2+r.IntN(5))
		for i := range rows {
			rows[i] = g.orderRow()
		}
		return insert("orders", ordersInsertCols, rows)
	case 23:
		return stmt{sql: "UPDATE orders SET amount = amount + ?, status = ? WHERE uid = ?", args: []any{r.IntN(10), g.pick(statuses), u()}, write: true}
	case 24:
		return stmt{sql: "UPDATE orders SET note = ? WHERE status = ? AND amount < ?",
			args: []any{fmt.Sprintf("u%d", r.IntN(9)), g.pick(statuses), r.IntN(100)}, write: true}
	case 25:
		return stmt{sql: "DELETE FROM orders WHERE uid = ? AND amount < ?", args: []any{u(), r.IntN(300)}, write: true}
	case 26:
		return stmt{sql: "DELETE FROM orders WHERE amount < ?", args: []any{r.IntN(3)}, write: true}
	// items (hash)
	case 27:
		return stmt{sql: "SELECT item_id, sku, qty, price FROM items WHERE item_id = ?", args: []any{g.itemKey()}}
	case 28:
		return stmt{sql: "SELECT item_id, qty FROM items WHERE item_id IN (?, ?, ?, ?)", args: []any{g.itemKey(), g.itemKey(), g.itemKey(), g.itemKey()}}
	case 29:
		lo := g.itemKey()
		return stmt{sql: "SELECT sku, qty FROM items WHERE item_id BETWEEN ? AND ? ORDER BY item_id", args: []any{lo, lo + 300}, ordered: true}
	case 30:
		return stmt{sql: "SELECT SUM(qty), COUNT(price), AVG(price), MIN(sku) FROM items"}
	case 31:
		return stmt{sql: "SELECT qty, COUNT(*), SUM(price) FROM items GROUP BY qty ORDER BY qty LIMIT 5", ordered: true}
	case 32:
		g.nextItem++
		return insert("items", itemsInsertCols, [][]any{g.itemRow(g.nextItem)})
	case 33:
		return stmt{sql: "UPDATE items SET qty = qty + 1 WHERE item_id = ?", args: []any{g.itemKey()}, write: true}
	// events (range)
	case 34:
		return stmt{sql: "SELECT eid, uid, kind, val FROM events WHERE eid = ?", args: []any{g.eid()}}
	case 35:
		lo := g.eid()
		return stmt{sql: "SELECT eid, val FROM events WHERE eid >= ? AND eid < ? ORDER BY eid", args: []any{lo, lo + r.Int64N(1500)}, ordered: true}
	case 36:
		return stmt{sql: "SELECT kind, COUNT(*), SUM(val), AVG(val) FROM events WHERE eid >= ? GROUP BY kind", args: []any{g.eid()}}
	case 37:
		return stmt{sql: fmt.Sprintf("SELECT eid, val FROM events ORDER BY val DESC, eid LIMIT %d OFFSET %d", 1+r.IntN(10), r.IntN(20)), ordered: true}
	case 38:
		return insert("events", eventsInsertCols, [][]any{g.eventRow(), g.eventRow()})
	case 39:
		return stmt{sql: "DELETE FROM events WHERE eid = ?", args: []any{g.eid()}, write: true}
	// logs (date by month)
	case 40:
		return stmt{sql: "SELECT lid, msg FROM logs WHERE day = ?", args: []any{g.day()}}
	case 41:
		return stmt{sql: "SELECT level, COUNT(*), MIN(day), MAX(day) FROM logs WHERE day IN (?, ?, ?) GROUP BY level",
			args: []any{g.day(), g.day(), g.day()}}
	case 42:
		return insert("logs", logsInsertCols, [][]any{g.logRow(), g.logRow()})
	// broadcast and unsharded tables
	case 43:
		return stmt{sql: "SELECT region, COUNT(*) FROM countries GROUP BY region ORDER BY region", ordered: true}
	case 44:
		c := countries[r.IntN(len(countries))]
		return stmt{sql: "UPDATE countries SET name = ? WHERE code = ?", args: []any{fmt.Sprintf("%s %d", c.name, r.IntN(3)), c.code}, write: true}
	default:
		switch r.IntN(3) {
		case 0:
			return stmt{sql: "SELECT COUNT(*), SUM(n), MAX(body) FROM notes WHERE id < ?", args: []any{r.IntN(notesSpace)}}
		case 1:
			g.note++
			return insert("notes", "id, body, n", [][]any{{g.note, "x", r.IntN(100)}})
		default:
			return stmt{sql: "UPDATE notes SET n = n + 1 WHERE id = ?", args: []any{r.IntN(notesSpace)}, write: true}
		}
	}
}

// category is one part of the workload: its weight in the random draw and
// a maker of one statement or of an episode (statements that must run in
// order in one session, such as SET sql_mode, the statements written for
// that mode, and the SET that restores it).
type category struct {
	name   string
	weight int
	make   func(*gen) []stmt
}

// categories are the workload's parts; SLUICE_SHARD_ONLY=old,collation,...
// runs only the ones it names. "old" is the original workload.
var categories = []category{
	{"old", 46, func(g *gen) []stmt { return []stmt{g.oldStmt()} }},
	{"collation", 12, (*gen).collationStmts},
	{"enum", 5, (*gen).enumStmts},
	{"groupby", 4, (*gen).groupByStmts},
	{"keys", 8, (*gen).keyStmts},
	{"modes", 3, (*gen).modeEpisode},
	{"uservar", 3, (*gen).userVarEpisode},
	{"outer", 4, (*gen).outerStmts},
	{"divprec", 2, (*gen).divPrecisionEpisode},
	{"hex", 4, (*gen).hexStmts},
	{"unparsed", 2, (*gen).unparsedStmts},
}

// refusalCodes are the documented refusals a tagged statement may get
// instead of the reference's answer: 1235 (ER_NOT_SUPPORTED_YET) for
// user variables in a statement that reaches a cluster other than the
// default one, a broadcast table on the preserved side of an outer join
// over several shards, and a statement sluice cannot parse that names a
// sharded table.
var refusalCodes = map[string]uint16{
	"uservar":         1235,
	"outer-broadcast": 1235,
	"unparsed":        1235,
}

// next returns the workload's next statement: the rest of the current
// episode, or a statement of a category drawn by weight among the enabled ones.
func (g *gen) next() stmt {
	for len(g.queue) == 0 {
		total := 0
		for _, c := range categories {
			if g.enabled(c.name) {
				total += c.weight
			}
		}
		n := g.r.IntN(total)
		for _, c := range categories {
			if !g.enabled(c.name) {
				continue
			}
			if n < c.weight {
				g.queue = c.make(g)
				for i := range g.queue {
					g.queue[i].cat = c.name
				}
				break
			}
			n -= c.weight
		}
	}
	s := g.queue[0]
	g.queue = g.queue[1:]
	return s
}

func (g *gen) enabled(cat string) bool { return g.only == nil || g.only[cat] }

// The people table: names that utf8mb4_general_ci holds equal in groups
// (case, trailing spaces, accents, ß = s, and every emoji weighs the same),
// latin1_swedish_ci cities (Ü sorts as Y, Å Ä Ö after Z), utf8mb4_unicode_ci
// titles (ß = ss, Æ = AE), utf8mb4_bin codes with ” and a backslash.
const (
	loadPeople       = 300
	peopleInsertCols = "pid, name, city, title, code, mood, perks, score, qty, cc"
)

var (
	personNames = [][]string{
		{"anna", "Anna", "ANNA", "anna ", "aNNa  "},
		{"björn", "Björn", "BJÖRN", "bjorn", "Bjorn "},
		{"éva", "Eva", "EVA ", "eva", "Éva"},
		{"smile😀", "smile😎", "SMILE🙂 ", "smile🎉"},
		{"straße", "STRASE", "strase "},
		{"_x"}, {"-x"}, {"x", "X", "x "},
		{"zoë", "Zoe", "ZOË "},
		{"øle", "Øle", "ole", "OLE "},
		{"li", "Li", "LI"}, {"lì", "Lí"},
	}
	cities = []string{"Malmö", "malmo", "MALMÖ ", "Åre", "are", "ÅRE", "Ärla", "ärla ", "Zürich", "Zyrich", "zurich",
		"Öland", "oland", "Oslo", "oslo ", "Aachen", "aachen", "Zagreb"}
	titles = []string{"Dr.", "dr.", "DR. ", "Straße", "STRASSE", "strasse", "Æther", "aether", "ÆTHER ", "Ⅻ", "xii",
		"🎉 party", "🎈 party", "Ça va", "ca va"}
	codes    = []string{"", "a", "A", "a ", "b", `a\b`, "ab", "AB", `b\n`, "é", "e"}
	moods    = []string{"zeta", "alpha", "mid", "", "Beta"}
	perkSets = []string{"", "x", "b", "a", "x,b", "x,a", "b,a", "x,b,a"}
	scores   = []float64{0.1, -2.5, 1e20, 3.25, 0, 7.125}
)

// person is a row the generator knows to exist (or to have existed).
type person struct {
	pid  int64
	name string
}

func (g *gen) personName() string {
	class := personNames[g.r.IntN(len(personNames))]
	return class[g.r.IntN(len(class))]
}

// nameVariant is a spelling of a stored name that the key's collation may
// hold equal: case changed, trailing spaces added.
func (g *gen) nameVariant() string {
	n := g.personName()
	switch g.r.IntN(4) {
	case 0:
		n = strings.ToUpper(n)
	case 1:
		n = strings.ToLower(n)
	}
	if g.r.IntN(3) == 0 {
		n += strings.Repeat(" ", 1+g.r.IntN(2))
	}
	return n
}

// cityVariant is a city as stored, or with its case changed or a trailing space.
func (g *gen) cityVariant() string {
	c := g.pick(cities)
	switch g.r.IntN(4) {
	case 0:
		return strings.ToUpper(c)
	case 1:
		return c + " "
	}
	return c
}

func (g *gen) personRow() []any {
	g.nextPid++
	name := g.personName()
	if g.r.IntN(3) == 0 {
		name = g.nameVariant()
	}
	g.people = append(g.people, person{g.nextPid, name})
	var title, score any
	if g.r.IntN(6) > 0 {
		title = g.pick(titles)
	}
	if g.r.IntN(5) > 0 {
		score = scores[g.r.IntN(len(scores))]
	}
	cc := "XX"
	if g.r.IntN(8) > 0 {
		cc = countries[g.r.IntN(len(countries))].code
	}
	return []any{g.nextPid, name, g.pick(cities), title, g.pick(codes), g.pick(moods), g.pick(perkSets), score, g.r.IntN(20), cc}
}

// Collations of the people columns, for comparing by weight.
const (
	collName  = "utf8mb4_general_ci"
	collCity  = "latin1_swedish_ci"
	collTitle = "utf8mb4_unicode_ci"
	collCode  = "utf8mb4_bin"
	// anyValue compares a column not at all: MariaDB shows any row's
	// value of a column that is neither grouped nor aggregated.
	anyValue = "*"
)

const peopleAll = "SELECT pid, name, city, title, code, mood, perks, score, qty, cc FROM people"

// collationStmts merge people's text columns over every shard: ORDER BY,
// GROUP BY, DISTINCT, MIN and MAX must follow each column's collation.
// They do not depend on where a name is stored (writes go by pid), so they
// test the merge apart from the routing of text keys (category keys).
func (g *gen) collationStmts() []stmt {
	r := g.r
	lim := func() int { return 1 + r.IntN(15) }
	switch r.IntN(15) {
	case 0:
		return one(stmt{sql: "SELECT name, COUNT(*), SUM(qty) FROM people GROUP BY name", colls: map[int]string{0: collName}, types: true})
	case 1:
		return one(stmt{sql: "SELECT city, COUNT(*), MIN(pid), MAX(qty) FROM people GROUP BY city ORDER BY city", ordered: true,
			colls: map[int]string{0: collCity}})
	case 2:
		return one(stmt{sql: "SELECT DISTINCT title FROM people ORDER BY title", ordered: true, colls: map[int]string{0: collTitle}})
	case 3:
		return one(stmt{sql: "SELECT DISTINCT code FROM people ORDER BY code DESC", ordered: true, colls: map[int]string{0: collCode}})
	case 4:
		return one(stmt{sql: "SELECT MIN(name), MAX(name), MIN(city), MAX(city), MIN(title), MAX(title), MIN(code), MAX(code) FROM people WHERE qty < ?",
			args: []any{r.IntN(25)}, colls: map[int]string{0: collName, 1: collName, 2: collCity, 3: collCity, 4: collTitle, 5: collTitle, 6: collCode, 7: collCode}})
	case 5:
		return one(stmt{sql: fmt.Sprintf("SELECT pid, city FROM people ORDER BY city, pid LIMIT %d OFFSET %d", lim(), r.IntN(40)), ordered: true})
	case 6:
		return one(stmt{sql: fmt.Sprintf("SELECT pid, name FROM people ORDER BY name DESC, pid LIMIT %d", lim()), ordered: true})
	case 7:
		return one(stmt{sql: "SELECT pid, title FROM people WHERE qty < ? ORDER BY title, pid", args: []any{r.IntN(20)}, ordered: true})
	case 8:
		return one(stmt{sql: "SELECT pid, city FROM people WHERE city = ?", args: []any{g.cityVariant()}})
	case 9:
		return one(stmt{sql: "SELECT title, COUNT(*) FROM people WHERE qty > ? GROUP BY title", args: []any{r.IntN(20)}, colls: map[int]string{0: collTitle}})
	case 10:
		return one(stmt{sql: "SELECT DISTINCT name FROM people WHERE qty < ?", args: []any{r.IntN(20)}, colls: map[int]string{0: collName}})
	case 11:
		return one(stmt{sql: "UPDATE people SET qty = qty + 1 WHERE pid = ?", args: []any{g.somePid()}, write: true})
	case 12:
		return one(insert("people", peopleInsertCols, [][]any{g.personRow()}))
	case 13:
		return one(stmt{sql: "SELECT city, title, COUNT(*) FROM people WHERE qty < ? GROUP BY city, title ORDER BY city DESC, title",
			args: []any{r.IntN(20)}, ordered: true, colls: map[int]string{0: collCity, 1: collTitle}})
	default:
		return one(stmt{sql: fmt.Sprintf("SELECT name, pid FROM people WHERE qty BETWEEN ? AND ? ORDER BY name, pid LIMIT %d", lim()),
			args: []any{r.IntN(10), 10 + r.IntN(10)}, ordered: true})
	}
}

// somePid is the pid of a row the generator knows of (or a new one).
func (g *gen) somePid() int64 {
	if len(g.people) == 0 {
		return g.nextPid + 1
	}
	return g.people[g.r.IntN(len(g.people))].pid
}

func one(s stmt) []stmt { return []stmt{s} }

// enumStmts order, group and aggregate ENUM and SET columns: ORDER BY and
// GROUP BY follow the members' positions, MIN and MAX their text.
func (g *gen) enumStmts() []stmt {
	r := g.r
	switch r.IntN(9) {
	case 0:
		return one(stmt{sql: "SELECT DISTINCT mood FROM people ORDER BY mood", ordered: true})
	case 1:
		return one(stmt{sql: "SELECT mood, COUNT(*), SUM(qty) FROM people GROUP BY mood ORDER BY mood DESC", ordered: true, types: true})
	case 2:
		return one(stmt{sql: "SELECT MIN(mood), MAX(mood), MIN(perks), MAX(perks) FROM people WHERE qty < ?", args: []any{r.IntN(25)}})
	case 3:
		return one(stmt{sql: "SELECT perks, COUNT(*) FROM people GROUP BY perks ORDER BY perks", ordered: true})
	case 4:
		return one(stmt{sql: fmt.Sprintf("SELECT pid, mood, perks FROM people ORDER BY mood, perks DESC, pid LIMIT %d", 1+r.IntN(20)), ordered: true})
	case 5:
		return one(stmt{sql: "SELECT pid FROM people WHERE mood = ? AND qty < ?", args: []any{g.pick(moods), r.IntN(20)}})
	case 6:
		return one(stmt{sql: "SELECT mood+0, perks+0, COUNT(*) FROM people GROUP BY mood, perks", types: true})
	case 7:
		return one(stmt{sql: "SELECT pid, name FROM people WHERE FIND_IN_SET(?, perks) ORDER BY pid LIMIT 20", args: []any{g.pick([]string{"x", "a", "b"})}, ordered: true})
	default:
		return one(stmt{sql: "UPDATE people SET mood = ?, perks = ? WHERE pid = ?", args: []any{g.pick(moods), g.pick(perkSets), g.somePid()}, write: true})
	}
}

// groupByStmts: MariaDB's GROUP BY x DESC (groups sorted descending), a
// GROUP BY naming an alias that is also a column (the column wins), and
// MIN/MAX whose winner is ”.
func (g *gen) groupByStmts() []stmt {
	r := g.r
	switch r.IntN(7) {
	case 0:
		return one(stmt{sql: fmt.Sprintf("SELECT qty, COUNT(*) FROM people GROUP BY qty DESC LIMIT %d", 1+r.IntN(5)), ordered: true})
	case 1:
		return one(stmt{sql: "SELECT status, COUNT(*), SUM(amount) FROM orders GROUP BY status DESC", ordered: true, types: true})
	case 2:
		// Grouped by the column country: the alias's values are any row's.
		return one(stmt{sql: "SELECT status AS country, COUNT(*) FROM orders WHERE uid < ? GROUP BY country",
			args: []any{g.uid()}, colls: map[int]string{0: anyValue}})
	case 3:
		return one(stmt{sql: "SELECT MIN(code), MAX(code), COUNT(*) FROM people WHERE qty < ?", args: []any{r.IntN(25)},
			colls: map[int]string{0: collCode, 1: collCode}})
	case 4:
		return one(stmt{sql: "SELECT note, COUNT(*) FROM orders WHERE uid < ? GROUP BY note DESC", args: []any{g.uid()}, ordered: true})
	case 5:
		return one(stmt{sql: "SELECT country, status, COUNT(*) FROM orders GROUP BY country DESC, status LIMIT 12", ordered: true})
	default:
		return one(stmt{sql: "SELECT MIN(code), MAX(title) FROM people WHERE code IN ('', 'a')", colls: map[int]string{0: collCode, 1: collTitle}})
	}
}

// spelled writes an integer key as the server would still compare equal to
// it: '042', ' 42', '42.0', 42.0 (a DOUBLE parameter), or plainly.
func (g *gen) spelled(k int64) any {
	switch g.r.IntN(6) {
	case 0:
		return fmt.Sprintf("%03d", k)
	case 1:
		return fmt.Sprintf(" %d", k)
	case 2:
		return fmt.Sprintf("%d.0", k)
	case 3:
		return float64(k)
	case 4:
		return fmt.Sprint(k)
	}
	return k
}

// keyStmts give integer keys spelled as strings and decimals, and string
// keys differing in case and trailing spaces, in reads, writes and INSERTs
// (an INSERT of a pid that exists, under a collation-equal name, is a
// duplicate on the reference and must be one through sluice too).
func (g *gen) keyStmts() []stmt {
	r := g.r
	switch r.IntN(17) {
	case 11, 12, 13:
		return one(stmt{sql: peopleAll + " WHERE name = ?", args: []any{g.nameVariant()}})
	case 14:
		return one(stmt{sql: "SELECT pid, name FROM people WHERE name IN (?, ?, ?)", args: []any{g.nameVariant(), g.nameVariant(), g.nameVariant()}})
	case 15:
		if r.IntN(4) == 0 {
			return one(stmt{sql: "DELETE FROM people WHERE name = ? AND qty > ?", args: []any{g.nameVariant(), 15 + r.IntN(5)}, write: true})
		}
		return one(stmt{sql: "UPDATE people SET qty = qty + 1 WHERE name = ?", args: []any{g.nameVariant()}, write: true})
	case 16:
		return one(stmt{sql: fmt.Sprintf("SELECT pid, name FROM people WHERE name = 0x%x", g.personName())})
	case 0, 1:
		return one(stmt{sql: "SELECT order_id, amount FROM orders WHERE uid = ?", args: []any{g.spelled(g.uid())}})
	case 2:
		lit := g.pick([]string{"'%03d'", "' %d'", "%d.0", "'%d.0'", "%d.00"})
		return one(stmt{sql: fmt.Sprintf("SELECT order_id, uid FROM orders WHERE uid = "+lit+" AND order_id > ?", g.uid()), args: []any{0}})
	case 3:
		return one(stmt{sql: "SELECT item_id, sku, qty FROM items WHERE item_id = ?", args: []any{g.spelled(g.itemKey())}})
	case 4:
		return one(stmt{sql: "SELECT item_id, qty FROM items WHERE item_id IN (?, ?)", args: []any{g.spelled(g.itemKey()), g.spelled(g.itemKey())}})
	case 5:
		return one(stmt{sql: "UPDATE items SET qty = qty + 1 WHERE item_id = ?", args: []any{g.spelled(g.itemKey())}, write: true})
	case 6:
		return one(stmt{sql: "UPDATE orders SET note = ? WHERE uid = ?", args: []any{fmt.Sprintf("k%d", r.IntN(9)), g.spelled(g.uid())}, write: true})
	case 7:
		g.nextItem++
		row := g.itemRow(g.nextItem)
		row[0] = g.spelled(g.nextItem)
		return one(insert("items", itemsInsertCols, [][]any{row}))
	case 8:
		row := g.orderRow()
		row[0] = g.spelled(row[0].(int64))
		return one(insert("orders", ordersInsertCols, [][]any{row}))
	case 9:
		return one(stmt{sql: "SELECT COUNT(*), SUM(qty) FROM people WHERE name = ?", args: []any{g.nameVariant()}})
	default:
		if len(g.people) == 0 {
			return one(insert("people", peopleInsertCols, [][]any{g.personRow()}))
		}
		p := g.people[r.IntN(len(g.people))]
		name := p.name
		switch r.IntN(3) {
		case 0:
			name = strings.ToUpper(name)
		case 1:
			name += " "
		}
		row := g.personRow()
		g.people = g.people[:len(g.people)-1]
		row[0], row[1] = p.pid, name
		return one(insert("people", peopleInsertCols, [][]any{row}))
	}
}

// modeEpisode sets one sql_mode that changes how text reads, runs
// statements written for it, and restores the session's mode.
func (g *gen) modeEpisode() []stmt {
	r := g.r
	var mode string
	var pool []stmt
	u := g.uid
	switch r.IntN(3) {
	case 0:
		mode = "ANSI_QUOTES"
		pool = []stmt{
			{sql: `SELECT COUNT(*) FROM "people" WHERE "qty" > ?`, args: []any{r.IntN(20)}},
			{sql: `SELECT "pid", "name" FROM people WHERE "pid" = ?`, args: []any{g.somePid()}},
			{sql: `SELECT "status", COUNT(*) FROM orders GROUP BY "status"`},
			{sql: `UPDATE orders SET "note" = 'aq' WHERE "uid" = ?`, args: []any{u()}, write: true},
			{sql: `SELECT o."order_id", c."name" FROM orders o JOIN countries c ON c."code" = o."country" WHERE o."uid" = ?`, args: []any{u()}},
			{sql: `SELECT "uid", SUM("amount") FROM orders WHERE "uid" IN (?, ?) GROUP BY "uid"`, args: []any{u(), u()}},
			{sql: `SELECT COUNT(*) FROM orders WHERE "note" = 'aq'`},
		}
	case 1:
		mode = "NO_BACKSLASH_ESCAPES"
		pool = []stmt{
			{sql: `SELECT pid, code FROM people WHERE code = 'a\b' AND qty >= ?`, args: []any{0}},
			{sql: `SELECT COUNT(*) FROM people WHERE code <> 'b\' AND qty >= ?`, args: []any{r.IntN(10)}},
			{sql: `SELECT order_id, CONCAT(status, '\n') FROM orders WHERE uid = ?`, args: []any{u()}},
			{sql: `SELECT COUNT(*) FROM orders WHERE status <> 'x\'`},
			{sql: `UPDATE orders SET note = 'b\s' WHERE uid = ?`, args: []any{u()}, write: true},
			{sql: `SELECT COUNT(*) FROM orders WHERE note = 'b\s'`},
			{sql: `SELECT pid, name FROM people WHERE pid < 100 AND code = 'b\n'`},
		}
	default:
		mode = "PIPES_AS_CONCAT"
		pool = []stmt{
			{sql: "SELECT pid, name || '!' FROM people WHERE pid = ?", args: []any{g.somePid()}},
			{sql: "SELECT COUNT(*) FROM orders WHERE status || 'x' = ?", args: []any{g.pick(statuses) + "x"}},
			{sql: "SELECT order_id, status || '-' || country FROM orders WHERE uid = ?", args: []any{u()}},
			{sql: "SELECT 'x' || 'y', COUNT(*) FROM orders WHERE uid IN (?, ?)", args: []any{u(), u()}},
			{sql: "SELECT order_id, 'n' || uid FROM orders WHERE uid BETWEEN ? AND ? ORDER BY order_id", args: []any{50, 60}, ordered: true},
			{sql: "UPDATE orders SET note = 'p' || uid WHERE uid = ?", args: []any{u()}, write: true},
		}
	}
	set := strings.TrimPrefix(g.baseMode+","+mode, ",")
	ep := []stmt{{sql: "SET SESSION sql_mode = '" + set + "'", write: true}}
	for range 2 + r.IntN(3) {
		ep = append(ep, pool[r.IntN(len(pool))])
	}
	return inSession(append(ep, stmt{sql: "SET SESSION sql_mode = '" + g.baseMode + "'", write: true}))
}

// ordersRule is the differential schema's orders rule (mod by uid).
var ordersRule = rulesFor(diffSchema)[0]

// uidOn is a random uid whose shard is on cluster.
func (g *gen) uidOn(cluster string) int64 {
	for {
		u := g.uid()
		if s, _ := ordersRule.shardOf(fmt.Sprint(u)); ordersRule.cluster(s) == cluster {
			return u
		}
	}
}

// otherCluster is a cluster that is not the default one.
var otherCluster = clusterNames[0]

// userVarEpisode sets user variables and reads them in statements: those
// that run on the default cluster only must be answered; those that reach
// another cluster may be refused (tag uservar).
func (g *gen) userVarEpisode() []stmt {
	r := g.r
	v := r.IntN(20)
	ep := []stmt{{sql: fmt.Sprintf("SET @v = %d", v), write: true}}
	pool := []func() stmt{
		func() stmt { return stmt{sql: "SELECT @v, @v + 1"} },
		func() stmt { return stmt{sql: "SELECT COUNT(*), SUM(n) FROM notes WHERE n > @v"} },
		func() stmt {
			return stmt{sql: "SELECT order_id, amount FROM orders WHERE uid = ? AND amount > @v", args: []any{g.uidOn(defaultCluster)}}
		},
		func() stmt {
			return stmt{sql: "SELECT order_id, amount FROM orders WHERE uid = ? AND amount > @v", args: []any{g.uidOn(otherCluster)}, tag: "uservar"}
		},
		func() stmt { return stmt{sql: "SELECT COUNT(*) FROM orders WHERE amount > @v * 10", tag: "uservar"} },
		func() stmt { return stmt{sql: "SELECT item_id FROM items WHERE qty = @v", tag: "uservar"} },
		func() stmt {
			return stmt{sql: "UPDATE notes SET n = @v WHERE id = ?", args: []any{r.IntN(notesSpace)}, write: true}
		},
		func() stmt {
			return stmt{sql: "UPDATE orders SET note = CONCAT('v', @v) WHERE uid = ?", args: []any{g.uidOn(defaultCluster)}, write: true}
		},
		func() stmt {
			return stmt{sql: "UPDATE orders SET note = CONCAT('v', @v) WHERE uid = ?", args: []any{g.uidOn(otherCluster)}, write: true, tag: "uservar"}
		},
	}
	for range 2 + r.IntN(3) {
		ep = append(ep, pool[r.IntN(len(pool))]())
	}
	ep = inSession(ep)
	if r.IntN(3) == 0 {
		ep = append(ep, inSession([]stmt{{sql: fmt.Sprintf("SET @s = '%s'", strings.TrimSpace(strings.ToLower(g.personName()))), write: true},
			{sql: "SELECT pid, name FROM people WHERE name = @s", tag: "uservar"}})...)
	}
	return ep
}

// inSession marks the statements after an episode's first (its SET) as
// running under that SET.
func inSession(ep []stmt) []stmt {
	for i := 1; i < len(ep); i++ {
		ep[i].session = ep[0].sql
	}
	return ep
}

// outerStmts join the broadcast table: on the preserved side of an outer
// join over several shards it may be refused (tag outer-broadcast); with
// the sharded table pinned to one shard, or preserved itself, it must be
// answered.
func (g *gen) outerStmts() []stmt {
	r := g.r
	tag := "outer-broadcast"
	switch r.IntN(9) {
	case 0:
		return one(stmt{sql: "SELECT c.code, COUNT(p.pid) FROM countries c LEFT JOIN people p ON p.cc = c.code GROUP BY c.code", tag: tag})
	case 1:
		return one(stmt{sql: "SELECT COUNT(*) FROM countries c LEFT JOIN orders o ON o.country = c.code AND o.amount > ?", args: []any{g.amount()}, tag: tag})
	case 2:
		return one(stmt{sql: "SELECT c.code, o.order_id FROM orders o RIGHT JOIN countries c ON c.code = o.country AND o.status = ? AND o.uid < ?",
			args: []any{g.pick(statuses), r.IntN(40)}, tag: tag})
	case 3:
		return one(stmt{sql: "SELECT c.code, o.order_id FROM countries c LEFT JOIN orders o ON o.country = c.code WHERE o.uid = ?",
			args: []any{g.uid()}, tag: tag, answerable: true})
	case 4:
		return one(stmt{sql: "SELECT c.name, o.order_id FROM countries c LEFT JOIN orders o ON o.country = c.code AND o.uid = ?",
			args: []any{g.uid()}, tag: tag})
	case 5:
		return one(stmt{sql: "SELECT p.pid, c.name FROM people p LEFT JOIN countries c ON c.code = p.cc WHERE p.qty < ?", args: []any{r.IntN(20)}})
	case 6:
		return one(stmt{sql: "SELECT o.order_id, c.region FROM countries c RIGHT JOIN orders o ON o.country = c.code WHERE o.uid = ?", args: []any{g.uid()}})
	case 7:
		return one(stmt{sql: "SELECT p.cc, COUNT(c.code) FROM people p LEFT JOIN countries c ON c.code = p.cc GROUP BY p.cc",
			colls: map[int]string{0: collCity}})
	default:
		return one(stmt{sql: "SELECT o.order_id, c.name FROM orders o LEFT JOIN countries c ON c.code = o.country AND c.region = ? WHERE o.uid = ?",
			args: []any{g.pick([]string{"eu", "am", "as"}), g.uid()}})
	}
}

// divPrecisionEpisode sets div_precision_increment, runs AVG and divisions
// (comparing result types and decimal sizes too), and restores it.
func (g *gen) divPrecisionEpisode() []stmt {
	r := g.r
	ep := []stmt{{sql: fmt.Sprintf("SET SESSION div_precision_increment = %d", r.IntN(11)), write: true}}
	lo := g.uid()
	pool := []stmt{
		{sql: "SELECT AVG(qty) FROM people", types: true},
		{sql: "SELECT AVG(amount), COUNT(*) FROM orders WHERE status = ?", args: []any{g.pick(statuses)}, types: true},
		{sql: "SELECT status, AVG(amount) FROM orders GROUP BY status", types: true},
		{sql: "SELECT AVG(price), AVG(qty) FROM items", types: true},
		{sql: "SELECT order_id, amount / 3, uid / 7 FROM orders WHERE uid = ?", args: []any{g.uid()}, types: true},
		{sql: "SELECT mood, AVG(qty) FROM people GROUP BY mood", types: true},
		{sql: "SELECT kind, AVG(val) FROM events WHERE eid < ? GROUP BY kind", args: []any{g.eid()}, types: true},
		{sql: "SELECT order_id, amount / 7 FROM orders WHERE uid BETWEEN ? AND ? ORDER BY order_id", args: []any{lo, lo + 5}, ordered: true, types: true},
	}
	for range 2 + r.IntN(3) {
		ep = append(ep, pool[r.IntN(len(pool))])
	}
	return inSession(append(ep, stmt{sql: "SET SESSION div_precision_increment = 4", write: true}))
}

// hexStmts write hex literals (0x.. and X'..') as keys, in arithmetic and
// as strings: a rewrite must keep them as written.
func (g *gen) hexStmts() []stmt {
	r := g.r
	switch r.IntN(9) {
	case 0:
		return one(stmt{sql: fmt.Sprintf("SELECT order_id, uid FROM orders WHERE uid = 0x%02x AND order_id > ?", g.uid()), args: []any{0}})
	case 1:
		return one(stmt{sql: fmt.Sprintf("SELECT order_id, uid FROM orders WHERE uid = X'%04x' AND order_id > ?", g.uid()), args: []any{0}})
	case 2:
		return one(stmt{sql: "SELECT order_id, 0x41+0, uid + 0x01, X'42' FROM orders WHERE uid = ?", args: []any{g.uid()}})
	case 3:
		return one(stmt{sql: "SELECT COUNT(*), SUM(uid + 0x10) FROM orders WHERE uid < 0x20 AND amount > ?", args: []any{g.amount()}})
	case 4:
		return one(stmt{sql: fmt.Sprintf("SELECT item_id, sku FROM items WHERE item_id = 0x%x AND qty >= ?", g.itemKey()), args: []any{0}})
	case 5:
		return one(stmt{sql: "SELECT pid, HEX(code) FROM people WHERE code = X'61' AND qty >= ?", args: []any{0}})
	case 6:
		return one(stmt{sql: "UPDATE orders SET note = 0x6869 WHERE uid = ?", args: []any{g.uid()}, write: true})
	case 7:
		return one(stmt{sql: "SELECT COUNT(*) FROM orders WHERE note = X'6869' AND uid < ?", args: []any{g.uid()}})
	default:
		return one(stmt{sql: fmt.Sprintf("SELECT order_id FROM orders WHERE uid IN (0x%x, %d) ORDER BY order_id", g.uid(), g.uid()), ordered: true})
	}
}

// unparsedStmts are MariaDB syntax sluice's parser may not read, naming
// sharded tables: answered right or refused (tag unparsed), never sent to
// one cluster unread.
func (g *gen) unparsedStmts() []stmt {
	r := g.r
	tag := "unparsed"
	switch r.IntN(4) {
	case 0:
		return one(stmt{sql: "SELECT COUNT(*) FROM orders WHERE 'a' SOUNDS LIKE 'a' AND amount >= ?", args: []any{0}, tag: tag})
	case 1:
		return one(stmt{sql: fmt.Sprintf("SELECT order_id FROM orders ORDER BY order_id OFFSET %d ROWS FETCH FIRST 3 ROWS ONLY", r.IntN(20)),
			ordered: true, tag: tag})
	case 2:
		return []stmt{{sql: "SELECT COUNT(*) INTO @cnt FROM orders WHERE amount > ?", args: []any{g.amount()}, write: true, tag: tag},
			{sql: "SELECT @cnt", afterPrev: true}}
	default:
		return one(stmt{sql: "SELECT COUNT(*) FROM items WHERE sku SOUNDS LIKE 'sku-1'", tag: tag})
	}
}
