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
	usedEvents               map[int64]bool
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
	return out
}

// next returns one random statement of the workload.
func (g *gen) next() stmt {
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
