package router

import (
	"errors"
	"strconv"
	"strings"
	"unsafe"

	"github.com/pingcap/tidb/pkg/parser"
)

// Kind is what a statement does, as far as routing is concerned.
type Kind uint8

const (
	// KindRead may run on a replica: SELECT (without FOR UPDATE, LOCK IN SHARE MODE,
	// FOR SHARE, INTO or SQL_CALC_FOUND_ROWS), set operations and WITH of such selects,
	// TABLE, VALUES, SHOW, DESCRIBE, EXPLAIN, HELP, provided it touches no state that lives
	// only in the client's connection (user variables, LAST_INSERT_ID(), FOUND_ROWS(),
	// ROW_COUNT(), named locks, sequences, @@warning_count and the like).
	KindRead Kind = iota
	// KindWrite must run on the master: DML, DDL, LOCK/UNLOCK, GRANT, CALL, DO, LOAD DATA,
	// FLUSH, KILL, locking or session-dependent reads, SET GLOBAL, SET of user variables,
	// SET TRANSACTION, multi-statement text, empty, unknown and unparseable text.
	KindWrite
	// KindUse is USE db; Plan.Schema names the database.
	KindUse
	// KindSet assigns session state the proxy tracks and replays on other connections;
	// Plan.Vars lists the assignments.
	KindSet
	// KindTxn is BEGIN, START TRANSACTION, COMMIT, ROLLBACK, SAVEPOINT, RELEASE SAVEPOINT
	// and XA; it runs on the master.
	KindTxn
)

func (k Kind) String() string {
	switch k {
	case KindRead:
		return "read"
	case KindWrite:
		return "write"
	case KindUse:
		return "use"
	case KindSet:
		return "set"
	case KindTxn:
		return "txn"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Target is where a statement wants to run, ignoring transactions.
type Target uint8

const (
	TargetMaster Target = iota
	TargetReplica
)

func (t Target) String() string {
	switch t {
	case TargetMaster:
		return "master"
	case TargetReplica:
		return "replica"
	}
	return "Target(" + strconv.Itoa(int(t)) + ")"
}

// Hint is a routing hint given by the client in a comment before the statement:
// "/* sluice:master */" or "/* sluice:replica */" (also as a "-- " or "#" line comment).
type Hint uint8

const (
	HintNone Hint = iota
	HintMaster
	HintReplica
)

func (h Hint) String() string {
	switch h {
	case HintNone:
		return "none"
	case HintMaster:
		return "master"
	case HintReplica:
		return "replica"
	}
	return "Hint(" + strconv.Itoa(int(h)) + ")"
}

// SessionVar is one session assignment of a SET statement.
type SessionVar struct {
	// Name is the normalized key: lower case, without @@, SESSION, LOCAL or session.
	// prefixes; "names" for SET NAMES, "character set" for SET CHARACTER SET,
	// "transaction_isolation" and "transaction_read_only" for SET SESSION TRANSACTION and
	// for their tx_isolation and tx_read_only aliases.
	Name string
	// SQL is a complete statement that re-applies exactly this one assignment on another
	// connection, restored from the parse tree: "SET SESSION sql_mode = 'ANSI'",
	// "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_bin'", "SET CHARACTER SET 'latin1'",
	// "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED". String literals are
	// written with backslashes escaped, as the server reads them by default.
	SQL string
	// Charset is the client character set an assignment to names,
	// "character set" or character_set_client selects, as written; "" there
	// when it is not a plain name (DEFAULT), and for other variables.
	Charset string
	// Modes are the lexing flags of an sql_mode assignment (ModesKnown);
	// ModesKnown is false for DEFAULT and for other variables.
	Modes      LexModes
	ModesKnown bool
	// ReadBack names the variable as written (lower case) when the value is
	// not a constant: it refers to a variable (CONCAT(@@sql_mode, ...)), a
	// parameter of a prepared statement, a subquery or a function that may
	// answer otherwise elsewhere. Replaying SQL would evaluate it again, on
	// another connection: the proxy reads the value the statement left
	// back from the connection that ran it (SELECT @@SESSION.<ReadBack>) and
	// replays that. "" for a constant value, which SQL replays exactly.
	ReadBack string
}

// FuncRef names a function a statement calls that is not a MariaDB
// built-in: a stored function, or a loadable one (UDF).
type FuncRef struct {
	// Schema is the schema the call names, as written; "" for an
	// unqualified call, which the server resolves in the session's default
	// schema.
	Schema string
	// Name is the function's name in lower case (function names are not
	// case-sensitive).
	Name string
	// Maybe: the call is a built-in unless the schema has a stored function
	// of that name (`now`(), NOW ()); only such a function can keep the
	// statement on the master.
	Maybe bool
}

// Plan is the router's verdict on one SQL text. Plans are shared between all callers that
// classify the same text and must not be modified.
type Plan struct {
	Kind Kind
	// Target is where the statement wants to go, ignoring transactions: KindRead goes to
	// a replica, everything else to the master. HintMaster always sends it to the master.
	// HintReplica sends it to a replica only when the statement cannot change data (a
	// query kept on the master because it touches session state or takes locks, such as
	// SELECT @x, SELECT FOUND_ROWS() or SELECT ... FOR UPDATE); a hint never sends DML,
	// DDL, SET, USE, transaction control, multi-statement or unparseable text to a replica.
	Target Target
	Hint   Hint
	// Schema is the database of KindUse, unquoted.
	Schema string
	// Vars are the assignments of KindSet in statement order. Several may share a
	// Name's effect (SET NAMES and SET CHARACTER SET both set character_set_client), so
	// a session that keeps the latest assignment per Name should replay in the order the
	// client issued them.
	Vars []SessionVar
	// Digest is the normalized statement text (literals replaced by ?, comments and
	// optimizer hints dropped), as parser.Normalize with redaction produces it. It holds
	// no literal values, so it is safe to log.
	Digest string
	// Multi reports that the text holds more than one statement (a single trailing ;
	// does not count); such text is KindWrite. It is known only for text the parser
	// accepts.
	Multi bool
	// ParseErr is non-nil when the TiDB parser rejected the text (it then wraps ErrParse)
	// or the text held no statement (ErrEmptyStatement); Kind is then KindWrite and the
	// server will report the real error. The message may quote part of the statement:
	// log it only where SQL text may be logged.
	ParseErr error
	// Modes are the sql_mode flags under which the text classifies differently (it holds
	// a backslash, a double quote or "||" that the server reads otherwise under
	// NO_BACKSLASH_ESCAPES, ANSI_QUOTES or PIPES_AS_CONCAT). The plan assumes the
	// server's default reading; a session with any of these modes must run the
	// statement on the master and not track its Vars or Schema.
	Modes LexModes
	// Funcs are the functions the statement calls that are not MariaDB built-ins.
	// Such a function may write: a statement with any goes to a replica only when
	// each is known to be declared NO SQL or READS SQL DATA.
	Funcs []FuncRef
	// NonASCII reports that the text holds a byte of 0x80 or above: under a client
	// character set in which a multi-byte character may hold a backslash or
	// backquote byte (UnsafeClientCharset) its reading is uncertain, and it must
	// run on the master, tracking nothing. (A non-ASCII byte outside literals and
	// comments, where the TiDB lexer and the server may disagree whatever the
	// character set, already makes the plan a master-only write.)
	NonASCII bool
	// LoadDataLocal marks LOAD DATA LOCAL INFILE: the server will ask the
	// client to send a file through the proxy.
	LoadDataLocal bool
	// FollowsPrevious marks a question about the previous statement (SHOW
	// WARNINGS, SHOW ERRORS, @@warning_count): it must run on the backend
	// connection that ran that statement, master or replica.
	FollowsPrevious bool
	// Pins is the connection state the statement creates that cannot be
	// replayed elsewhere; the session then keeps its connections.
	Pins Pin
	// Local marks SELECT LAST_INSERT_ID() / SELECT ROW_COUNT(), which the
	// proxy answers from the session's last OK packet: with connections
	// shared between statements, the connection that ran the INSERT may be
	// serving someone else. LocalName is the result's column name.
	Local     LocalFunc
	LocalName string
	// Found is what the statement does to the server's FOUND_ROWS(), as
	// far as its text tells (FoundRowsEffect); Call marks CALL, whose
	// procedure may change any connection-scoped value.
	Found FoundRowsEffect
	Call  bool
	// DDL: the text holds a statement that changes what a schema holds:
	// CREATE, ALTER, DROP or RENAME of a database, table, view, index,
	// sequence, routine, trigger or event, as the digest's first words
	// say (not of a temporary table, user, role or server). Unparsed and
	// multi-statement texts count too, so a schema mirror may run once
	// more than needed, never less.
	DDL bool
	// Opaque: the proxy cannot be sure it read the text as the server
	// will: the parser rejected it, it holds several statements, or the
	// server may run more or less of it (executable comments, /*T! */,
	// bytes the lexers disagree on). See UnsureConnectionCommand.
	Opaque bool
	// TiDBComment: the text holds a /*T! comment, code to the parser and
	// a comment to the server, or a /*M! or versioned /*!NNNNN comment,
	// which the server may run and the parser may drop. Hazard: outside literals and comments, as
	// some sql_mode reads the quotes, the text holds a byte the two
	// lexers may read differently (see HazardUnder for one mode's
	// reading). Both make the text Opaque.
	TiDBComment, Hazard bool
	// NoTables: a SELECT, SET or DO that names no table. Raising no
	// warning or error itself, it leaves the previous statement's
	// diagnostics in place on the server, for a SHOW WARNINGS after it.
	NoTables bool
	// Scoped lists the values of the client's own connection the
	// statement reads (LAST_INSERT_ID(), ROW_COUNT(), FOUND_ROWS(),
	// CONNECTION_ID()) and where; nil for most statements.
	Scoped *Scoped
	// Txn is what a KindTxn statement does to the transaction.
	Txn TxnOp
	// Release is what a COMMIT or ROLLBACK says about ending the
	// connection after it (RELEASE, NO RELEASE, or nothing: then the
	// session's completion_type decides).
	Release TxnRelease
	// Access is what the statement needs of the account that runs it,
	// for the grants check; never nil (Unknown when sluice cannot tell).
	Access *Access
}

// TxnOp is what a transaction-control statement does.
type TxnOp uint8

const (
	// TxnOther: RELEASE SAVEPOINT, ROLLBACK TO SAVEPOINT, XA.
	TxnOther TxnOp = iota
	// TxnBegin: BEGIN, START TRANSACTION.
	TxnBegin
	// TxnEnd: COMMIT, ROLLBACK.
	TxnEnd
	// TxnSavepoint: SAVEPOINT.
	TxnSavepoint
)

// TxnRelease is the RELEASE clause of COMMIT and ROLLBACK: with RELEASE the
// server closes the connection after the statement's OK.
type TxnRelease uint8

const (
	// ReleaseDefault: no clause; the server releases when the session's
	// completion_type is RELEASE (2).
	ReleaseDefault TxnRelease = iota
	// ReleaseYes: COMMIT RELEASE, ROLLBACK AND NO CHAIN RELEASE.
	ReleaseYes
	// ReleaseNo: COMMIT NO RELEASE, whatever completion_type says.
	ReleaseNo
)

// ErrParse is wrapped by Plan.ParseErr when the parser rejected the text.
var ErrParse = errors.New("router: statement not understood by the parser")

// ErrEmptyStatement is Plan.ParseErr for text that holds only whitespace, comments or ;.
var ErrEmptyStatement = errors.New("router: empty statement")

// maxCachedText is the longest text the exact-text level caches. Longer texts (bulk
// inserts, generated IN lists) rarely repeat verbatim; they still share the digest level.
const maxCachedText = 16 << 10

// Router classifies SQL text into Plans through a bounded two-level cache.
//
// The first level is keyed by the exact text: a statement the application repeats
// (prepared by the driver, or issued by an ORM) is a single map lookup without allocation.
// On a miss the router normalizes the text (parser.Normalize) and looks the digest up in
// the second level, which holds plans of single plain read or write statements; texts
// that differ only in literal values (client-side interpolated parameters) share it and
// skip the full parse. Only on a second miss is the text parsed. The digest level is not
// used for SET, USE and transaction statements (their plans carry values), for parse
// failures, multi-statement text, or text with backslashes or executable comments. A
// text the parser would reject may still share the plan of a valid text with the same
// digest (SELECT 1 2 and SELECT 'a' 'b' differ only in literals): it then routes like that
// text, without ParseErr, and the server reports the syntax error.
//
// Between the two sits the shape level: a text's literal shape (the text with its quoted
// strings and numbers replaced, see literalShape) keyed to the digest level's plans, so
// that a text seen before only with other values is classified by a scan and a lookup,
// without the normalizer's cost and allocations.
//
// All levels are bounded sharded maps with second-chance eviction; see cache.
//
// A Router is safe for concurrent use by any number of sessions.
type Router struct {
	exact  *cache[*Plan]
	digest *cache[*digestPlans]
	// shape maps a text's literal shape (literalShape) to its digest's
	// plans: a text that misses the exact level but has the shape of one
	// seen before costs a scan and a lookup instead of a normalization.
	shape *cache[*digestPlans]
}

// digestPlans holds the plan of one digest for each hint, for texts of
// ASCII only and for texts with other bytes (Plan.NonASCII): index
// digestIndex.
type digestPlans [6]*Plan

// digestIndex is the place in digestPlans of the plan for hint h of a text
// with flags f.
func digestIndex(h Hint, f textFlags) int {
	if f&flagNonASCII != 0 {
		return int(h) + 3
	}
	return int(h)
}

// New returns a Router whose cache holds at most cacheEntries plans: three quarters for
// exact texts and a quarter (if that is at least one) for digests. The shape level keys
// as many shapes as the digest level holds digests; its entries point at the digest
// level's plans. With cacheEntries < 1 nothing is cached and every call parses.
func New(cacheEntries int) *Router {
	if cacheEntries < 1 {
		return &Router{}
	}
	digestEntries := cacheEntries / 4
	return &Router{
		exact:  newCache[*Plan](cacheEntries - digestEntries),
		digest: newCache[*digestPlans](digestEntries),
		shape:  newCache[*digestPlans](digestEntries),
	}
}

// Classify returns the plan for one COM_QUERY text. The returned Plan is shared and
// immutable. A repeated text costs one map lookup and no allocation. The router keeps its
// own copy of any text it caches, so sql may alias a buffer the caller reuses.
func (r *Router) Classify(sql string) *Plan {
	if r.exact != nil {
		if p, ok := r.exact.get(sql); ok {
			return p
		}
	}
	if p := r.byShape(sql); p != nil {
		return p
	}
	return r.miss(sql, false)
}

// ClassifyBytes is Classify for a text held in a byte slice, such as a COM_QUERY payload:
// a cached text costs no allocation and no copy. The router does not keep b.
func (r *Router) ClassifyBytes(b []byte) *Plan {
	if r.exact != nil {
		if p, ok := r.exact.getBytes(b); ok {
			return p
		}
	}
	if len(b) > maxParsedText {
		return hugePlan(string(b[:hintWindow]))
	}
	// A view of b, not a copy: byShape keeps nothing of the text.
	if p := r.byShape(unsafe.String(unsafe.SliceData(b), len(b))); p != nil {
		return p
	}
	return r.miss(string(b), true)
}

// shapeScratch is how long a literal shape byShape builds without
// allocating; longer texts still work, at the cost of a buffer.
const shapeScratch = 512

// byShape returns the plan of sql from the shape level, or nil. It reads sql
// only during the call and allocates nothing for texts up to shapeScratch.
func (r *Router) byShape(sql string) *Plan {
	if r.shape == nil || len(sql) > maxCachedText {
		return nil
	}
	f := scanTextFlags(sql)
	if f&bypassFlags != 0 {
		return nil
	}
	var scratch [shapeScratch]byte
	key, ok := literalShape(scratch[:0], sql)
	if !ok {
		return nil
	}
	dp, ok := r.shape.getBytes(key)
	if !ok {
		return nil
	}
	return dp[digestIndex(leadingHint(sql), f)]
}

// rememberShape files dp, the digest plans sql was served from, under sql's
// literal shape.
func (r *Router) rememberShape(sql string, dp *digestPlans) {
	if r.shape == nil || len(sql) > maxCachedText {
		return
	}
	var scratch [shapeScratch]byte
	if key, ok := literalShape(scratch[:0], sql); ok {
		r.shape.put(string(key), dp)
	}
}

// maxParsedText is the longest text the router parses. Longer ones are bulk
// loads or statements carrying big values (a 20 MB BLOB inlined by a driver):
// parsing them costs more than it can tell, so they go to the master, the
// safe side, unclassified.
const maxParsedText = 1 << 20

// hintWindow is how much of a huge text is searched for a leading hint.
const hintWindow = 4096

// hugePlans are the plans of texts over maxParsedText, one per hint. A
// replica hint cannot move an unclassified text off the master.
var hugePlans = [...]*Plan{
	HintNone:    {Kind: KindWrite, Target: TargetMaster, Hint: HintNone, Pins: PinUntracked, Access: unknownAccess},
	HintMaster:  {Kind: KindWrite, Target: TargetMaster, Hint: HintMaster, Pins: PinUntracked, Access: unknownAccess},
	HintReplica: {Kind: KindWrite, Target: TargetMaster, Hint: HintReplica, Pins: PinUntracked, Access: unknownAccess},
}

func hugePlan(prefix string) *Plan { return hugePlans[leadingHint(prefix)] }

// Len reports how many plans the cache holds, both levels together.
func (r *Router) Len() int {
	return r.exact.len() + r.digest.len()
}

// miss classifies a text that is not in the exact-text cache. owned reports that sql is
// a private copy the cache may keep.
func (r *Router) miss(sql string, owned bool) *Plan {
	if len(sql) > maxParsedText {
		return hugePlan(sql[:hintWindow])
	}
	cacheable := r.exact != nil && len(sql) <= maxCachedText
	if cacheable && !owned {
		// Work on the copy the cache will keep, so that nothing in the plan can alias
		// the caller's memory.
		sql = strings.Clone(sql)
	}
	hint := leadingHint(sql)
	flags := scanTextFlags(sql)
	digest := parser.Normalize(sql, "ON")
	useDigest := r.digest != nil && flags&bypassFlags == 0 && digest != "" && strings.IndexByte(digest, ';') < 0

	var plan *Plan
	if useDigest {
		if dp, ok := r.digest.get(digest); ok {
			plan = dp[digestIndex(hint, flags)]
			r.rememberShape(sql, dp)
		}
	}
	if plan == nil {
		a := analyze(sql, flags)
		if useDigest && (a.kind == KindRead || a.kind == KindWrite) && !a.multi && a.parseErr == nil && !a.recognized && a.local == LocalNone && (a.scoped == nil || a.scoped.Refs == nil) &&
			(a.access == nil || !a.access.literal) {
			var dp digestPlans
			for i := range dp {
				a.nonASCII = i >= 3
				dp[i] = a.plan(Hint(i%3), digest)
			}
			r.digest.put(digest, &dp)
			r.rememberShape(sql, &dp)
			plan = dp[digestIndex(hint, flags)]
		} else {
			plan = a.plan(hint, digest)
		}
	}
	if cacheable {
		r.exact.put(sql, plan)
	}
	return plan
}

// plan builds the Plan of an analysis for one hint.
func (a *analysis) plan(hint Hint, digest string) *Plan {
	p := &Plan{
		Kind:            a.kind,
		Hint:            hint,
		Schema:          a.schema,
		Vars:            a.vars,
		Digest:          digest,
		Multi:           a.multi,
		ParseErr:        a.parseErr,
		Modes:           a.modes,
		Funcs:           a.funcs,
		NonASCII:        a.nonASCII,
		LoadDataLocal:   a.localInfile,
		FollowsPrevious: a.previous,
		Pins:            a.pins,
		Local:           a.local,
		LocalName:       a.localName,
		Scoped:          a.scoped,
		NoTables:        a.noTables,
		Opaque:          a.opaque || a.multi || a.parseErr != nil,
		TiDBComment:     a.tidbComment,
		Hazard:          a.hazard,
		Found:           foundRowsEffectOf(digest),
		Call:            strings.HasPrefix(digest, "call "),
		DDL:             changesSchema(digest),
		Txn:             a.txn,
		Release:         a.release,
		Access:          a.access,
	}
	if p.Access == nil {
		p.Access = unknownAccess
	}
	if a.kind == KindRead {
		p.Target = TargetReplica
	}
	switch hint {
	case HintMaster:
		p.Target = TargetMaster
	case HintReplica:
		if a.readOnly {
			p.Target = TargetReplica
		}
	}
	return p
}

// ClassifyText is ClassifyBytes that also returns the text as a string the
// caller may keep (COM_STMT_PREPARE keeps it to prepare lazily elsewhere):
// for a cached text, the cache's own copy, so a hit allocates nothing.
func (r *Router) ClassifyText(b []byte) (*Plan, string) {
	if r.exact != nil {
		if p, k, ok := r.exact.getBytesKey(b); ok {
			return p, k
		}
	}
	sql := string(b)
	return r.miss(sql, true), sql
}

// FoundRowsEffect is what a statement does to FOUND_ROWS() on the server.
type FoundRowsEffect uint8

const (
	// FoundFromResult: a result set sets it to its rows; a statement
	// without one leaves it.
	FoundFromResult FoundRowsEffect = iota
	// FoundKept: SHOW WARNINGS and SHOW ERRORS leave it, result or not.
	FoundKept
	// FoundBySelect: a statement that selects without returning rows
	// (INSERT or REPLACE ... SELECT, CREATE TABLE ... SELECT, SELECT ...
	// INTO, a SET from a subquery) sets it to what it selected, which
	// only its connection knows. DO, UPDATE and DELETE leave it, whatever
	// their subqueries, as MariaDB does.
	FoundBySelect
)

// foundRowsEffectOf tells a statement's FoundRowsEffect from its digest.
func foundRowsEffectOf(digest string) FoundRowsEffect {
	if strings.HasPrefix(digest, "show warnings") || strings.HasPrefix(digest, "show errors") {
		return FoundKept
	}
	for _, p := range [...]string{"insert ", "replace ", "create ", "set ", "select "} {
		if strings.HasPrefix(digest, p) && strings.Contains(digest, "select ") {
			return FoundBySelect
		}
	}
	return FoundFromResult
}

// changesSchema reports a digest (parser.Normalize's lower-case text)
// holding a statement that changes what a schema holds (Plan.DDL).
func changesSchema(digest string) bool {
	for rest := digest; rest != ""; {
		st, after, _ := strings.Cut(rest, ";")
		rest = after
		w, st := nextWord(st)
		if w != "create" && w != "alter" && w != "drop" && w != "rename" {
			continue
		}
		w, st = nextWord(st)
		if w == "or" { // CREATE OR REPLACE
			_, st = nextWord(st)
			w, _ = nextWord(st)
		}
		switch w {
		case "temporary", "user", "role", "server", "":
			continue
		}
		return true
	}
	return false
}

// nextWord splits the first space-separated word off s.
func nextWord(s string) (string, string) {
	s = strings.TrimLeft(s, " ")
	w, rest, _ := strings.Cut(s, " ")
	return w, rest
}
