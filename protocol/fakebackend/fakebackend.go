// Package fakebackend is a scripted MySQL server for unit tests of code that
// talks to backends: it listens on a loopback port, logs clients in with
// mysql_native_password, answers each query as a script says (a result set,
// an OK or an ERR, at once, late, or by dropping the connection) and records
// every command it receives, so a test can assert what its client sent.
//
// It speaks the text protocol with EOF packets (it offers neither
// CLIENT_DEPRECATE_EOF nor session tracking) and answers COM_PING,
// COM_INIT_DB, COM_SET_OPTION, COM_RESET_CONNECTION and COM_QUIT itself;
// prepared statements and other commands get ERR 1047 unless a handler
// (OnFunc) answers them. A Server is safe for concurrent use, and Close
// leaves no goroutine of it behind.
package fakebackend

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sync"

	"github.com/sluice-proxy/sluice/protocol"
)

// Config is what a Server tells and asks its clients.
type Config struct {
	// User and Password are the one account a client may log in with; an
	// empty User lets any user in with any password.
	User, Password string
	// ServerVersion is sent in the greeting; the default names MariaDB,
	// as code that tells the two apart looks for that word.
	ServerVersion string
	// Capabilities are the flags the greeting offers; 0 means
	// DefaultCapabilities.
	Capabilities uint32
	// Status is a new connection's status flags; 0 means autocommit.
	Status uint16
}

// DefaultCapabilities are what a Server offers unless Config says
// otherwise: those sluice asks of its backends and what common drivers use,
// without CLIENT_DEPRECATE_EOF, CLIENT_SESSION_TRACK or CLIENT_SSL.
const DefaultCapabilities = protocol.BackendCapabilities | protocol.ClientConnectWithDB |
	protocol.ClientFoundRows | protocol.ClientMultiStatements | protocol.ClientLocalFiles |
	protocol.ClientConnectAttrs

const defaultVersion = "10.11.0-MariaDB-fakebackend"

// Command is one command a Server received, or a login.
type Command struct {
	// ConnID is the connection's id, as its greeting announced it
	// (the first connection is 1).
	ConnID uint32
	// Command is the command byte (protocol.ComQuery, ...); a login is
	// recorded as protocol.ComConnect.
	Command byte
	// Arg is the text of COM_QUERY and COM_STMT_PREPARE, the schema of
	// COM_INIT_DB and the table of COM_FIELD_LIST; a login's user.
	Arg string
	// Packet is the command's whole payload (a copy); a login's is the
	// handshake response.
	Packet []byte
	// Database is the schema a login asked for.
	Database string
}

func (c Command) String() string {
	if c.Command == protocol.ComConnect {
		return fmt.Sprintf("conn %d login %s (database %q)", c.ConnID, c.Arg, c.Database)
	}
	return fmt.Sprintf("conn %d %s %s", c.ConnID, protocol.CommandName(c.Command), c.Arg)
}

// rule answers a command and true, or false for a command it leaves to
// other rules.
type rule func(Command) (Result, bool)

// Server is a scripted MySQL server on 127.0.0.1.
type Server struct {
	cfg    Config
	stored []byte // SHA1(SHA1(cfg.Password)), nil for no password
	ln     net.Listener
	done   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once

	mu        sync.Mutex
	rules     []rule
	unmatched *Result
	log       []Command
	conns     map[uint32]net.Conn
	nextID    uint32
	closed    bool
}

// Start listens on a free loopback port and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = defaultVersion
	}
	if cfg.Capabilities == 0 {
		cfg.Capabilities = DefaultCapabilities
	}
	if cfg.Status == 0 {
		cfg.Status = protocol.StatusAutocommit
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{}), conns: map[uint32]net.Conn{}}
	if cfg.Password != "" {
		h1 := sha1.Sum([]byte(cfg.Password))
		h2 := sha1.Sum(h1[:])
		s.stored = h2[:]
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the host:port the Server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops listening, closes every connection and returns once all of
// the Server's goroutines have ended.
func (s *Server) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		for _, nc := range s.conns {
			nc.Close()
		}
		s.mu.Unlock()
		close(s.done)
		s.ln.Close()
	})
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.nextID++
		id := s.nextID
		s.conns[id] = nc
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(id, nc)
	}
}

// OnQuery answers COM_QUERY text query (exactly that text) with r.
func (s *Server) OnQuery(query string, r Result) {
	s.addRule(func(c Command) (Result, bool) {
		return r, c.Command == protocol.ComQuery && c.Arg == query
	})
}

// OnPattern answers a COM_QUERY whose whole text the regular expression
// pattern matches with r. It panics if pattern does not compile.
func (s *Server) OnPattern(pattern string, r Result) {
	re := regexp.MustCompile(`^(?:` + pattern + `)$`)
	s.addRule(func(c Command) (Result, bool) {
		return r, c.Command == protocol.ComQuery && re.MatchString(c.Arg)
	})
}

// OnFunc lets f answer any command (COM_PING and COM_INIT_DB among them):
// it returns the answer and true, or false to leave the command to the
// other rules. f runs on the connection's goroutine and may be called
// concurrently for several connections.
func (s *Server) OnFunc(f func(Command) (Result, bool)) {
	s.addRule(f)
}

// OnUnmatched sets the answer to a COM_QUERY no rule matches; the default
// is ERR 1105 naming the query.
func (s *Server) OnUnmatched(r Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unmatched = &r
}

func (s *Server) addRule(r rule) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, r)
}

// script returns the answer of the most recently added rule that matches
// c, or false when none does.
func (s *Server) script(c Command) (Result, bool) {
	s.mu.Lock()
	rules := s.rules
	s.mu.Unlock()
	for i := len(rules) - 1; i >= 0; i-- {
		if r, ok := rules[i](c); ok {
			return r, true
		}
	}
	return Result{}, false
}

// unmatchedQuery is the answer to a COM_QUERY no rule matches.
func (s *Server) unmatchedQuery(query string) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unmatched != nil {
		return *s.unmatched
	}
	return Result{Err: protocol.ERUnknownError.New("fakebackend: no script for query %q", query)}
}

// record appends c to the log.
func (s *Server) record(c Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, c)
}

// Commands returns every command and login received so far, in the order
// they arrived.
func (s *Server) Commands() []Command {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Command(nil), s.log...)
}

// Queries returns the text of every COM_QUERY received so far, in order.
func (s *Server) Queries() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var q []string
	for _, c := range s.log {
		if c.Command == protocol.ComQuery {
			q = append(q, c.Arg)
		}
	}
	return q
}

// ClearCommands empties the log.
func (s *Server) ClearCommands() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// Conns returns the ids of the connections open now.
func (s *Server) Conns() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]uint32, 0, len(s.conns))
	for id := range s.conns {
		ids = append(ids, id)
	}
	return ids
}

// Kill closes connection id as a server's KILL does, without a word to
// its client, and reports whether it was open.
func (s *Server) Kill(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	nc, ok := s.conns[id]
	if ok {
		nc.Close()
	}
	return ok
}

// forget drops connection id from the open ones.
func (s *Server) forget(id uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, id)
}
