package grants

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// stmtTimeout bounds one statement on one side. lockWait is the sessions'
// lock_wait_timeout: a LOCK TABLES group of another account is over in
// milliseconds, so a lock wait never gets near it unless something hangs,
// and then the statement fails with 1205 instead of hanging the test.
const (
	stmtTimeout = 30 * time.Second
	lockWait    = "10"
)

// side is one of the two places every statement runs: the reference
// server, or the target (sluice, or the cluster's master).
type side struct {
	name   string // "reference" or the target's name
	addr   string
	victim *victimSession
	dir    string // where {out} files go
}

// openDB is a pool of user's sessions to addr that keeps no idle
// connection, so every Conn is a new session. The sessions wait at most
// lockWait seconds for a lock.
func openDB(a account, addr string) (*sql.DB, error) {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr = a.name, a.password, "tcp", addr
	c.Timeout, c.ReadTimeout, c.WriteTimeout = 5*time.Second, stmtTimeout, stmtTimeout
	c.Params = map[string]string{"lock_wait_timeout": lockWait}
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	db.SetMaxIdleConns(0)
	return db, nil
}

// victimSession is the gp_victim session KILL statements aim at on one side,
// with its connection id as that side reports it. Its mutex is held from
// filling {victim} into a statement until the statement has run, so the id
// stays right while it runs.
type victimSession struct {
	mu   sync.Mutex
	db   *sql.DB
	conn *sql.Conn // nil: open one before the next use
	id   int64
}

// ensure makes sure the victim's session is open and knows its id, opening
// a new one when the last was killed. Callers hold v.mu.
func (v *victimSession) ensure(ctx context.Context) error {
	if v.conn != nil {
		var id int64
		if err := v.conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err == nil && id == v.id {
			return nil
		}
		v.drop()
	}
	c, err := v.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("opening the victim's session: %w", err)
	}
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&v.id); err != nil {
		c.Close()
		return fmt.Errorf("reading the victim's connection id: %w", err)
	}
	v.conn = c
	return nil
}

// drop forgets the victim's session (killed, or about to be found so).
// Callers hold v.mu.
func (v *victimSession) drop() {
	if v.conn != nil {
		v.conn.Close()
		v.conn = nil
	}
}

// answer is what one side said to one statement.
type answer struct {
	code uint16 // the MySQL error number, 0 for success or a transport error
	msg  string // the error message as the server sent it
	// transport is the error when it was not a server's error (a lost
	// connection, a timeout).
	transport string
}

func (a answer) String() string {
	switch {
	case a.transport != "":
		return "transport error: " + a.transport
	case a.code == 0:
		return "OK"
	default:
		return fmt.Sprintf("ERROR %d: %s", a.code, a.msg)
	}
}

// answerOf turns an Exec error into an answer.
func answerOf(err error) answer {
	if err == nil {
		return answer{}
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return answer{code: me.Number, msg: me.Message}
	}
	return answer{transport: err.Error()}
}

// record is one statement run by one account on both sides.
type record struct {
	acct  string
	idx   int // the statement's index in the corpus
	kind  string
	sql   [2]string // as sent: reference, target
	ans   [2]answer
	norms [2]string // the error messages with the side's fillings put back as placeholders
}

// runner runs one account's share of the corpus on both sides, one session
// per side, statement by statement: reference first, then target.
type runner struct {
	acct  account
	sides [2]*side
	dbs   [2]*sql.DB
	conns [2]*sql.Conn
	// reconnects counts the times both sessions were replaced after a
	// transport error on either side.
	reconnects int
}

func newRunner(ctx context.Context, a account, sides [2]*side) (*runner, error) {
	r := &runner{acct: a, sides: sides}
	for k, sd := range sides {
		db, err := openDB(a, sd.addr)
		if err != nil {
			return nil, err
		}
		r.dbs[k] = db
	}
	if err := r.connect(ctx); err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// connect opens a new session on each side, replacing any open one, so both
// sides start from the same session state.
func (r *runner) connect(ctx context.Context) error {
	for k := range r.conns {
		if r.conns[k] != nil {
			r.conns[k].Close()
			r.conns[k] = nil
		}
		c, err := r.dbs[k].Conn(ctx)
		if err == nil {
			err = c.PingContext(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s cannot log in on the %s (%s): %w", r.acct.name, r.sides[k].name, r.sides[k].addr, err)
		}
		r.conns[k] = c
	}
	return nil
}

func (r *runner) close() {
	for k := range r.conns {
		if r.conns[k] != nil {
			r.conns[k].Close()
		}
		if r.dbs[k] != nil {
			r.dbs[k].Close()
		}
	}
}

// runAll runs the account's share of stmts and returns one record per
// statement run.
func (r *runner) runAll(ctx context.Context, seed uint64, share float64, stmts []stmt) ([]record, error) {
	h := fnv.New64a()
	h.Write([]byte(r.acct.name))
	pick := rand.New(rand.NewPCG(seed, h.Sum64()))
	var out []record
	keep, group := false, -1
	for i, s := range stmts {
		if s.group != group {
			group, keep = s.group, pick.Float64() < share
		}
		if !keep {
			continue
		}
		if err := ctx.Err(); err != nil {
			return out, err
		}
		rec := record{acct: r.acct.name, idx: i, kind: s.kind}
		lost := false
		for k, sd := range r.sides {
			rec.sql[k], rec.ans[k], rec.norms[k] = r.runOn(ctx, k, sd, i, s.sql)
			lost = lost || rec.ans[k].transport != ""
		}
		out = append(out, rec)
		if lost {
			r.reconnects++
			if err := r.connect(ctx); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// runOn runs statement i (text q) on side k and returns the text sent, the
// answer and the answer's message normalised.
func (r *runner) runOn(ctx context.Context, k int, sd *side, i int, q string) (string, answer, string) {
	// perSide are the fillings that differ between the sides.
	var perSide []string
	if strings.Contains(q, "{out}") {
		perSide = append(perSide, "{out}", fmt.Sprintf("%s/out-%s-%s-%d.txt", sd.dir, sd.name, r.acct.tag, i))
	}
	if strings.Contains(q, "{victim}") {
		v := sd.victim
		v.mu.Lock()
		defer v.mu.Unlock()
		if err := v.ensure(ctx); err != nil {
			return q, answer{transport: fmt.Sprintf("victim on the %s: %v", sd.name, err)}, ""
		}
		perSide = append(perSide, "{victim}", strconv.FormatInt(v.id, 10))
		if !strings.Contains(q, "QUERY") {
			// A KILL (not KILL QUERY) may end the victim's session:
			// whatever the answer, the next use opens a new one.
			defer v.drop()
		}
	}
	fills := append([]string{"{u}", r.acct.tag, "{load}", loadFile(sd.dir)}, perSide...)
	text := strings.NewReplacer(fills...).Replace(q)
	sctx, cancel := context.WithTimeout(ctx, stmtTimeout)
	defer cancel()
	_, err := r.conns[k].ExecContext(sctx, text)
	a := answerOf(err)
	return text, a, normalise(a.msg, perSide)
}

// normalise puts the placeholders back into msg where the side's own
// fillings (pairs of placeholder and value) appear, so that messages naming
// a value of their side (the victim's connection id, an {out} file) compare
// equal when they say the same thing. Numbers are replaced only as whole
// numbers.
func normalise(msg string, fills []string) string {
	for j := 0; j+1 < len(fills); j += 2 {
		placeholder, value := fills[j], fills[j+1]
		if _, err := strconv.ParseInt(value, 10, 64); err == nil {
			msg = regexp.MustCompile(`\b`+value+`\b`).ReplaceAllString(msg, placeholder)
			continue
		}
		msg = strings.ReplaceAll(msg, value, placeholder)
	}
	return msg
}

// loadFile is the file LOAD DATA INFILE reads on every side.
func loadFile(dir string) string { return dir + "/load.tsv" }

// loadRows is loadFile's content: rows (id, a) that no other statement writes.
const loadRows = "400001\t1\n400002\t2\n400003\t3\n"
