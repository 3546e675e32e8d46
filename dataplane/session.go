package dataplane

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime/debug"
	"strconv"
	"time"
	"unsafe"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/auth"
	"github.com/sluice-proxy/sluice/health"
	"github.com/sluice-proxy/sluice/internal/evloop"
	"github.com/sluice-proxy/sluice/internal/mono"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
	"github.com/sluice-proxy/sluice/shard"
)

// fallbackVersion is advertised when no master has been reached yet.
const fallbackVersion = "5.5.5-10.11.0-sluice"

// trackedVar is a session variable assignment the session made, replayed in
// order on every connection that serves it.
type trackedVar struct {
	router.SessionVar
}

// Session serves one client connection: login, then one command at a time.
// It holds at most one data connection to the master and one to a replica,
// opened lazily, and replays the client's session state (schema, SET
// variables, multi-statement option) onto whichever one serves a statement.
// A Session is owned by the goroutine running it.
type Session struct {
	// Handle holds what other goroutines may read or do: the id, the
	// client connection, the SHOW SESSIONS info, the drain state.
	Handle
	env *Env
	// task runs the session on an event loop; nil when a goroutine of its
	// own serves it. counted: the session is in the clients gauge.
	task    *evloop.Task
	counted bool
	// reauth is what the login left for COM_CHANGE_USER (it may hold an
	// auth-server connection); close closes it.
	reauth *auth.Reauth

	user string
	caps uint32 // the client's capabilities, limited to sluice's
	key  poolKey
	// clusterLeg is the session's state towards the cluster its current
	// statement runs on. With sharding, legs parks the state towards every
	// other cluster (the active cluster's slot is stale until useCluster
	// parks it); without, legs is nil and the one leg is always active.
	clusterLeg
	legs []clusterLeg
	// txBegin is the client's BEGIN / START TRANSACTION text while a
	// transaction is open under sharding: it is sent to a cluster's master
	// when the transaction first touches that cluster. txWrites is the
	// cluster the transaction wrote to, -1 before its first write.
	txBegin  string
	txWrites int
	// pendingTxWrite is the cluster of the sharded write being run on the
	// ordinary path (-1: none); once it succeeds inside a transaction it
	// becomes txWrites. txSavepoints are the transaction's SAVEPOINT
	// statements, replayed on each cluster it reaches later.
	pendingTxWrite int
	txSavepoints   []string

	// diagFrom holds the diagnostics (warnings, errors) a SHOW WARNINGS
	// would show: the connection that ran the session's previous
	// statement, or an earlier one when the statements after it named no
	// table and raised nothing.
	diagFrom *BackendConn

	schema     string
	lastStatus uint16 // status flags of the last final OK/EOF any backend sent
	vars       []trackedVar
	// pins are the sticky reasons (router.Pin) the session keeps its
	// connections; holdWarnings keeps the last one for SHOW WARNINGS.
	pins         router.Pin
	holdWarnings bool
	// lastInsertID and rowCount answer SELECT LAST_INSERT_ID() and SELECT
	// ROW_COUNT() from the session's last OK packets.
	lastInsertID uint64
	rowCount     int64
	// replay is what the session's SETs left beyond tracked variables
	// (setreplay.go).
	replay setReplay
	// aside makes replica picks use their own wheel position (work that
	// is not a client statement).
	aside      bool
	multiStmts bool

	stmts      map[uint32]*preparedStmt
	nextStmtID uint32
	// freeStmts are closed statements kept for reuse by the next prepare.
	freeStmts []*preparedStmt
	scratch   []byte // reused for packets sluice rewrites or builds
	scratch2  []byte
	// shardPkt holds a statement rewritten for one physical table; args
	// and argText a prepared execution's parameters as shard key values.
	shardPkt []byte
	args     []shard.Value
	argTypes []shard.ParamType
	argText  []byte
	renamed  shard.Row

	// rec is what the current command recorded for metrics and the slow
	// log (metrics_session.go); cmdStart is when it was read (monoNow).
	rec      commandRecord
	cmdStart time.Duration
	// lims is the session's view of its user's [limits] (limits.go).
	lims sessionLimits
	// lex is how the server lexes the session's statements
	// (replicasafety.go).
	lex lexState
	// scoped is what the session knows of its connection-scoped values
	// (scoped.go).
	scoped scopedState
}

// clusterLeg is what a session holds for one cluster: the cluster as of the
// snapshot of epoch epoch (loaded again per statement, followTopology), its
// place in every snapshot's Clusters, the data connections borrowed from
// the cluster's pools and the replica reads stay with.
type clusterLeg struct {
	cluster    *health.Cluster
	clusterIdx int
	epoch      uint64

	master  *BackendConn
	replica *BackendConn
	// readFrom is the replica the session reads from: it borrows a new
	// connection to it per statement and stays with it while it is up and
	// no probe round ended since readRound, when it was picked.
	readFrom  *health.Backend
	readRound uint64
	// consistency is the cluster's read consistency; lastGTID the GTID of
	// the session's last committed transaction on it (tracked in causal
	// mode).
	consistency consistency
	lastGTID    []byte
	// appliedOn had applied lastGTID as of probe round appliedRound.
	appliedOn    *health.Backend
	appliedRound uint64
	// lostOn is a replica the session's connection to broke during a
	// statement: reads avoid it while it does not answer its probes
	// (health.Backend.Unresponsive), before the probes mark it down.
	lostOn *health.Backend
	// txBegun: the session's open transaction (txBegin) was started on
	// this cluster's master.
	txBegun bool
}

// initLeg points a fresh leg at cluster i of the current snapshot.
func (s *Session) initLeg(l *clusterLeg, i int) {
	snap := s.env.topo.Current()
	l.clusterIdx = i
	l.cluster, l.epoch = snap.Clusters[i], snap.Epoch
	l.consistency = consistencyOf(s.env.config().Cluster(l.cluster.Name).Consistency)
}

// useCluster makes cluster i (its index in the configuration and in every
// snapshot) the one the session's next exchange runs on.
func (s *Session) useCluster(i int) {
	if i == s.clusterIdx {
		return
	}
	if s.legs == nil {
		// A reload brought shard rules to a session made without.
		s.legs = make([]clusterLeg, len(s.env.cfg.Clusters))
	}
	s.legs[s.clusterIdx] = s.clusterLeg
	s.clusterLeg = s.legs[i]
	if s.cluster == nil {
		s.initLeg(&s.clusterLeg, i)
	}
}

// eachLeg calls f with every leg that has been used, the active one
// included.
func (s *Session) eachLeg(f func(l *clusterLeg)) {
	f(&s.clusterLeg)
	for i := range s.legs {
		if i != s.clusterIdx && s.legs[i].cluster != nil {
			f(&s.legs[i])
		}
	}
}

func newSession(env *Env, id uint32, nc net.Conn) *Session {
	c := protocol.NewLeanConn(nc)
	c.MaxPacket = int(env.config().Proxy.MaxAllowedPacket)
	s := &Session{
		Handle:         Handle{id: id, client: c},
		env:            env,
		stmts:          make(map[uint32]*preparedStmt),
		txWrites:       -1,
		pendingTxWrite: -1,
	}
	s.resetScoped()
	if env.shards() != nil {
		s.legs = make([]clusterLeg, len(env.cfg.Clusters))
	}
	s.info.idleSince.Store(int64(mono.Now()))
	return s
}

// log returns a logger with the session's fields. It is built when
// something is logged, not kept: a zap child logger costs kilobytes, and
// idle sessions must cost little (a few are logged per session, none per
// statement at info level).
func (s *Session) log() *zap.Logger {
	if s.user == "" {
		return s.env.log.With(zap.Uint32("conn_id", s.id), zap.Stringer("client", s.client.NetConn().RemoteAddr()))
	}
	return s.env.log.With(zap.Uint32("conn_id", s.id), zap.Stringer("client", s.client.NetConn().RemoteAddr()), zap.String("user", s.user))
}

// start logs the client in; it reports whether the session is to be
// served.
func (s *Session) start(ctx context.Context) bool {
	if err := s.login(ctx); err != nil {
		result := "error"
		if errors.Is(err, auth.ErrAccessDenied) {
			result = "denied"
		} else if errors.Is(err, errLoginBackoff) {
			result = "blocked"
		}
		s.env.metrics.Logins.WithLabelValues(result).Inc()
		s.env.metrics.LoginFailed(err, s.client.SentErr)
		s.log().Info("login failed", zap.String("user", s.user), zap.Error(err))
		return false
	}
	s.env.metrics.Logins.WithLabelValues("ok").Inc()
	s.log().Info("client connected", zap.String("schema", s.schema))
	s.afterCommand()
	s.client.Idle()
	return true
}

// serveAll serves the client's commands until it leaves (start is when it
// connected).
func (s *Session) serveAll(start time.Time) {
	err := s.serve()
	s.log().Info("client disconnected", zap.Duration("duration", time.Since(start)), zap.NamedError("reason", err))
}

// login runs the handshake on a goroutine of its own. The auth relay and
// the schema check need a deep stack; a goroutine's stack shrinks only when
// a GC finds it mostly unused, which an idle session's that grew to 8 KiB
// never is. The session goroutine so keeps its small stack while it waits
// for commands.
func (s *Session) login(ctx context.Context) (err error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				s.log().Error("login panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
				done <- fmt.Errorf("login panicked: %v", r)
			}
		}()
		done <- s.handshake(ctx)
	}()
	return <-done
}

// handshake authenticates the client within handshake_timeout, checks the
// schema it asked for on a backend, and sends the final OK.
func (s *Session) handshake(ctx context.Context) error {
	deadline := time.Now().Add(s.env.config().Proxy.HandshakeTimeout.Duration)
	_ = s.client.SetDeadline(deadline)
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	remote := s.client.NetConn().RemoteAddr()
	if e := s.env.loginRefusal(remote); e != nil {
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", errLoginBackoff, e)
	}
	host, _, _ := net.SplitHostPort(remote.String())
	version := s.env.serverVersion()
	if version == "" && s.env.config().Auth.Backend == "static" {
		version = fallbackVersion
	}
	login, err := s.env.auth.Authenticate(actx, s.client, auth.Server{
		ConnectionID:  s.id,
		ServerVersion: version,
		Capabilities:  s.env.clientCaps,
		Collation:     DefaultCollation,
		ClientHost:    host,
		TLS:           s.env.tls,
		RequireTLS:    s.env.cfg.Proxy.RequireTLS,
		Refused:       s.env.loginRefused(remote, "client"),
	})
	if login != nil {
		s.user = login.User
	}
	if err != nil {
		return err
	}
	s.env.loginSucceeded(remote)
	s.user = login.User
	s.reauth = login.Reauth
	if login.User == s.env.cfg.Admin.User {
		e := s.env.host.RefuseAdminOnDataPort(host)
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", auth.ErrAccessDenied, e)
	}
	if e := s.acquireUser(login.User); e != nil {
		_ = s.client.WriteErr(e)
		return e
	}
	s.multiStmts = login.Capabilities&protocol.ClientMultiStatements != 0
	s.key = poolKey{
		collation:  login.Collation,
		foundRows:  login.Capabilities&protocol.ClientFoundRows != 0,
		localFiles: login.Capabilities&protocol.ClientLocalFiles != 0,
	}
	s.initLeg(&s.clusterLeg, s.env.defaultCluster())
	s.caps = login.Capabilities
	if err := s.checkSchema(login.Database); err != nil {
		_ = s.client.WriteErr(err)
		return err
	}
	if err := s.client.WritePacketFlush(protocol.AppendOK(nil, protocol.OK{Status: protocol.StatusAutocommit})); err != nil {
		return err
	}
	return s.client.SetDeadline(time.Time{})
}

// checkSchema makes db the session's schema after checking it exists on a
// backend. The auth server does not hold the application's schemas: an
// unknown one fails the login here, as MySQL would, not at the first query.
// A pooled connection that turns out dead (the pool hands out connections
// that rested less than idleCheckAfter unchecked) fails nothing: as a read
// would be, the check is retried once, after the pools have dropped the
// idle connections the servers closed with it.
func (s *Session) checkSchema(db string) *protocol.SQLError {
	if db == "" {
		return nil
	}
	if st := s.cluster.Master.Status(); st != nil && st.Schemas.Has(db) {
		// The master's last probe saw it: no backend connection needed,
		// so a login (a driver's cancel connection among them) does not
		// queue behind busy pools.
		s.schema = db
		return nil
	}
	// Ask the pool for a connection as the session will want it: one that
	// already has db selected proves the schema exists at no cost.
	prev := s.schema
	s.schema = db
	var bc *BackendConn
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		s.aside = true
		bc, err = s.backendFor(router.TargetReplica, nil)
		s.aside = false
		if err != nil {
			break
		}
		if err = s.sync(bc); err == nil {
			return nil
		}
		dead := bc.broken
		s.dropIfBroken(bc)
		if !dead {
			break
		}
		s.env.metrics.BackendErrs.WithLabelValues(bc.backend.Role.String()).Inc()
		s.env.dropDeadIdle()
	}
	s.schema = prev
	var se *protocol.SQLError
	if err != nil && !errors.As(err, &se) {
		return protocol.CRServerLost.New("Lost connection to %s while selecting schema %q: %v", describe(bc), db, err)
	}
	return protocol.ToSQLError(err)
}

// comChangeUser re-authenticates the client through the auth backend and
// starts a fresh session state, as COM_CHANGE_USER does on a server. A
// failed change closes the connection, as MySQL does.
func (s *Session) comChangeUser(p []byte) error {
	cu, err := protocol.ParseChangeUser(p, s.caps)
	if err != nil {
		_ = s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: COM_CHANGE_USER: %v", err))
		return err
	}
	s.resetState()
	s.schema = ""
	// The auth server's connection is in Go's poller: off the loop.
	if s.task.Detach() {
		defer s.task.Attach()
	}
	ctx, cancel := context.WithTimeout(s.env.ctx, s.env.config().Proxy.HandshakeTimeout.Duration)
	defer cancel()
	_ = s.client.SetDeadline(time.Now().Add(s.env.config().Proxy.HandshakeTimeout.Duration))
	defer s.client.SetDeadline(time.Time{})
	s.lims.idleArmed = false // replaced by the login's deadline
	remote := s.client.NetConn().RemoteAddr()
	if e := s.env.loginRefusal(remote); e != nil {
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", errLoginBackoff, e)
	}
	host, _, _ := net.SplitHostPort(remote.String())
	login, err := s.env.auth.ChangeUser(ctx, s.client, auth.Server{
		ConnectionID: s.id,
		Capabilities: s.env.clientCaps,
		Collation:    s.key.collation,
		ClientHost:   host,
		Refused:      s.env.loginRefused(remote, "client"),
	}, s.caps, s.reauth, cu)
	if login != nil && login.Reauth != nil {
		s.reauth = login.Reauth
	}
	if err != nil {
		s.log().Info("change user refused", zap.String("new_user", cu.User), zap.Error(err))
		return err
	}
	s.env.loginSucceeded(remote)
	if login.User == s.env.cfg.Admin.User {
		// As at login: the admin user's name is the admin port's, even
		// when the auth server has an account of that name.
		e := s.env.host.RefuseAdminOnDataPort(host)
		s.log().Info("change user refused", zap.String("new_user", login.User), zap.Error(e))
		_ = s.client.WriteErr(e)
		return fmt.Errorf("%w: %w", auth.ErrAccessDenied, e)
	}
	if e := s.acquireUser(login.User); e != nil {
		s.log().Info("change user refused", zap.String("new_user", login.User), zap.Error(e))
		_ = s.client.WriteErr(e)
		return e
	}
	s.log().Info("user changed", zap.String("new_user", login.User))
	s.user = login.User
	if login.Collation != 0 {
		s.key.collation = login.Collation
	}
	if e := s.checkSchema(login.Database); e != nil {
		_ = s.client.WriteErr(e)
		return e
	}
	return s.writeOK() // serve releases the connection after the command
}

// serve runs the command loop until the client quits or fails.
func (s *Session) serve() error {
	for {
		if s.idleForDrain() {
			return errShutdown
		}
		s.client.ResetSeq()
		p, err := s.readCommand()
		if s.awake() {
			return errShutdown
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return err // idle_timeout
			}
			if errors.Is(err, protocol.ErrPacketTooLarge) || errors.Is(err, protocol.ErrPacketOutOfOrder) {
				_ = s.client.WriteErr(protocol.ToSQLError(err))
				return err
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(p) == 0 {
			if err := s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: empty command")); err != nil {
				return err
			}
			continue
		}
		s.pendingTxWrite = -1
		s.cmdStart = mono.Now()
		ok, err := s.admit(p[0])
		if ok {
			timed := s.armQueryTimer()
			err = s.dispatch(p)
			if timed {
				s.disarmQueryTimer()
			}
		}
		if err != nil {
			if errors.Is(err, errQuit) {
				return nil
			}
			return err
		}
		s.finishCommand(p, s.cmdStart)
		s.afterCommand()
		// Waiting for the next command holds no write buffer.
		s.client.Idle()
	}
}

var errQuit = errors.New("client quit")

// dispatch serves one command. An error ends the session; failures the
// client should see are written as ERR packets and return nil.
func (s *Session) dispatch(p []byte) error {
	switch cmd := p[0]; cmd {
	case protocol.ComQuit:
		return errQuit
	case protocol.ComPing:
		return s.writeOK()
	case protocol.ComQuery:
		return s.comQuery(p)
	case protocol.ComInitDB:
		db := string(p[1:])
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.schema, bc.schema = db, db
			}
		})
	case protocol.ComFieldList:
		target := router.TargetReplica
		if s.inTransaction() || s.pins&(router.PinTempTable|router.PinUntracked) != 0 {
			target = router.TargetMaster
		}
		return s.forward(target, p, protocol.ResponseFieldList, nil)
	case protocol.ComStatistics:
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, nil)
	case protocol.ComSetOption:
		if len(p) != 3 {
			return s.client.WriteErr(protocol.ERMalformedPacket.New("Malformed communication packet: COM_SET_OPTION needs 2 bytes"))
		}
		on := binary.LittleEndian.Uint16(p[1:]) == protocol.OptionMultiStatementsOn
		return s.forward(router.TargetMaster, p, protocol.ResponseSingle, func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.multiStmts, bc.multiStmts = on, on
			}
		})
	case protocol.ComResetConnection:
		s.resetState()
		return s.writeOK()
	case protocol.ComChangeUser:
		return s.comChangeUser(p)
	case protocol.ComStmtPrepare:
		return s.comStmtPrepare(p)
	case protocol.ComStmtExecute:
		return s.comStmtExecute(p)
	case protocol.ComStmtSendLongData:
		return s.comStmtSendLongData(p)
	case protocol.ComStmtFetch:
		return s.comStmtFetch(p)
	case protocol.ComStmtReset:
		return s.comStmtReset(p)
	case protocol.ComStmtClose:
		return s.comStmtClose(p)
	default:
		return s.client.WriteErr(protocol.ERUnknownCommand.New("Unknown command: sluice does not support %s (0x%02x)", protocol.CommandName(cmd), cmd))
	}
}

// comQuery classifies a statement and forwards it to the master or a
// replica.
func (s *Session) comQuery(p []byte) error {
	var plan *router.Plan
	var sql string
	if s.env.shards() != nil {
		plan, sql = s.env.router.ClassifyText(p[1:])
	} else {
		plan = s.env.router.ClassifyBytes(p[1:])
	}
	s.rec.plan = plan
	s.info.setText(p[1:])
	if plan.LoadDataLocal && !s.key.localFiles {
		if !s.env.cfg.Proxy.LocalInfile {
			return s.client.WriteErr(protocol.ERNotAllowedCommand.New("sluice: LOAD DATA LOCAL INFILE is disabled ([proxy] local_infile = false)"))
		}
		return s.client.WriteErr(protocol.ERNotAllowedCommand.New("sluice: LOAD DATA LOCAL INFILE needs a client that allows local files (CLIENT_LOCAL_FILES)"))
	}
	doubt := s.lexDoubt(plan)
	if (plan.Opaque || doubt) && !answeredBySluice(plan) && router.UnsureConnectionCommand(unsafe.String(unsafe.SliceData(p[1:]), len(p)-1)) {
		// sluice cannot tell what this text does with connection ids.
		e := protocol.ERNotSupportedYet.New("sluice does not run this text: it cannot be sure how the server reads it (it does not parse it, it holds several statements, or the session's sql_mode or character set changes its reading), and it may address connections by backend thread ids (KILL, the process list, SHOW EXPLAIN FOR) or run dynamic SQL it cannot read; send such a statement on its own, in plain text")
		s.noteResult(protocol.RelayResult{Err: e})
		return s.client.WriteErr(e)
	}
	if plan.Local != router.LocalNone {
		// KILL and the process list: sessioncmds.go.
		q, done, err := s.sessionCommand(plan, p)
		if done {
			return err
		}
		if q == nil {
			return s.answerLocal(plan)
		}
		p = q
	}
	if refused, err := s.refuseDefaultRole(plan, p[1:]); refused {
		return err
	}
	if plan.LoadDataLocal {
		// The client streams the file as part of the command.
		s.disarmIdle()
	}
	s.beginStatement(plan)
	// Pin before running: even a failing statement may have left state.
	// SQL_CALC_FOUND_ROWS does not pin: sluice learns the count once the
	// statement ran (scoped.go).
	s.pin(plan.Pins &^ router.PinFoundRows)
	if s.env.shards() != nil {
		q, handled, err := s.shardQuery(p, plan, sql)
		if handled {
			return err
		}
		p = q
	}
	target := s.route(plan)
	var after func(*BackendConn, protocol.RelayResult)
	kind := plan.Kind
	if doubt {
		// Under the session's sql_mode or character set the server may
		// read other statements in the text than the router saw: route()
		// sent it to the master, and nothing is tracked from it: the
		// session keeps its connections, whatever the text changed.
		kind = router.KindWrite
		s.pin(router.PinUntracked)
	}
	switch kind {
	case router.KindUse:
		after = func(bc *BackendConn, res protocol.RelayResult) {
			if res.Err == nil {
				s.schema, bc.schema = plan.Schema, plan.Schema
			}
		}
	case router.KindSet:
		after = s.afterSet(plan)
	case router.KindTxn:
		if s.releases(plan) {
			after = s.afterRelease
		}
	}
	resp := protocol.ResponseResult
	if s.key.localFiles {
		resp = protocol.ResponseResultLocalInfile
	}
	// A question about a previous statement that ended clean (no
	// warning, no error) must find the diagnostics area empty, as on the
	// session's own server connection; a pooled connection holds what
	// its last statement left.
	clearDiag := plan.FollowsPrevious && !s.holdWarnings
	if invisible := invisibleLID(plan, doubt); plan.Scoped != nil || invisible || clearDiag {
		// It reads values of the client's own connection: see scoped.go.
		clientSeq := s.client.Seq()
		return s.exchange(target, func(bc *BackendConn) (protocol.RelayResult, error) {
			if clearDiag {
				// A statement that reads a table and raises nothing
				// empties the diagnostics area.
				if _, err := bc.queryValue("SELECT 1 FROM information_schema.ENGINES LIMIT 0"); err != nil {
					return protocol.RelayResult{}, err
				}
				if plan.Scoped == nil && !invisible {
					return s.send(bc, p, clientSeq, resp)
				}
			}
			q, err := s.scopedText(bc, p, plan, invisible)
			if err != nil {
				return protocol.RelayResult{}, err
			}
			return s.send(bc, q, clientSeq, resp)
		}, after)
	}
	err := s.forward(target, p, resp, after)
	if err == nil && s.replay.quit {
		// COMMIT / ROLLBACK RELEASE: the server ended the connection.
		return errQuit
	}
	return err
}

// inTransaction reports whether the session has a transaction open on the
// master, or autocommit off, as the master's last status flags say.
func (s *Session) inTransaction() bool {
	if s.master != nil && s.master.inTransaction() {
		return true
	}
	if s.legs == nil {
		return false
	}
	if s.txBegin != "" {
		return true
	}
	for i := range s.legs {
		if i != s.clusterIdx && s.legs[i].master != nil && s.legs[i].master.inTransaction() {
			return true
		}
	}
	return false
}

// recordVars adds SET assignments to the session state. A re-assigned
// variable moves to the end so replay keeps the client's order.
//
// bc is the connection that ran them (nil when they were not just run):
// an sql_mode whose lexing flags the router could not tell is read back
// from it.
func (s *Session) recordVars(vars []router.SessionVar, bc *BackendConn) {
	for _, v := range vars {
		for i := range s.vars {
			if s.vars[i].Name == v.Name {
				s.vars = append(s.vars[:i], s.vars[i+1:]...)
				break
			}
		}
		s.vars = append(s.vars, trackedVar{SessionVar: v})
		if v.Name == "sql_mode" {
			s.noteSQLMode(v, bc)
		}
	}
}

// dropVar forgets a tracked session variable.
func (s *Session) dropVar(name string) {
	for i := range s.vars {
		if s.vars[i].Name == name {
			s.vars = append(s.vars[:i], s.vars[i+1:]...)
			if name == "sql_mode" {
				s.lex = lexState{}
			}
			return
		}
	}
}

// resetState implements COM_RESET_CONNECTION: the data connections go back
// to their pools (which reset them) and the tracked state is cleared. The
// schema stays, as on MySQL.
func (s *Session) resetState() {
	s.release(true)
	s.vars = s.vars[:0]
	s.lex = lexState{}
	s.pins = 0
	s.holdWarnings = false
	s.resetScoped()
	s.replay = setReplay{}
	clear(s.stmts)
}

// forward sends the client's command p unchanged to a backend of the
// target role and relays the answer, framed as kind.
func (s *Session) forward(target router.Target, p []byte, kind protocol.ResponseKind, after func(*BackendConn, protocol.RelayResult)) error {
	clientSeq := s.client.Seq()
	return s.exchange(target, func(bc *BackendConn) (protocol.RelayResult, error) {
		return s.send(bc, p, clientSeq, kind)
	}, after)
}

// send writes one command packet to bc and relays the answer to the client,
// whose next packet carries clientSeq.
func (s *Session) send(bc *BackendConn, p []byte, clientSeq uint8, kind protocol.ResponseKind) (protocol.RelayResult, error) {
	bc.ResetSeq()
	if err := bc.WritePacketFlush(p); err != nil {
		return protocol.RelayResult{}, fmt.Errorf("%w: %w", protocol.ErrBackendIO, err)
	}
	s.client.SetSeq(clientSeq)
	return protocol.Relay(s.client, bc.Conn, kind, false)
}

// exchange runs one client command against a backend of the target role:
// it picks and brings up to date the data connection, lets run do the
// command's I/O (relaying the answer to the client), and deals with a
// backend that fails. A command whose replica breaks before any byte
// reached the client is retried once on another backend; otherwise the
// client gets an ERR and the session goes on. A *protocol.SQLError from run
// with nothing relayed yet goes to the client as it is. Only a failing
// client ends the session (the returned error).
func (s *Session) exchange(target router.Target, run func(*BackendConn) (protocol.RelayResult, error), after func(*BackendConn, protocol.RelayResult)) error {
	if err := s.followTopology(); err != nil {
		return err
	}
	var skip *health.Backend
	refused := false
	for attempt := 0; ; attempt++ {
		bc, err := s.backendFor(target, skip)
		if err == nil {
			err = s.sync(bc)
			if err != nil {
				s.dropIfBroken(bc)
			}
		}
		if err != nil {
			var se *protocol.SQLError
			if errors.As(err, &se) {
				return s.client.WriteErr(se)
			}
			// bc broke while sluice replayed session state on it.
			s.env.metrics.BackendErrs.WithLabelValues(bc.backend.Role.String()).Inc()
			if inTx := s.master == nil && bc != nil && bc.backend.Role == health.RoleMaster && bc.inTransaction(); inTx {
				_ = s.client.WriteErr(lostInTransaction(bc))
				return fmt.Errorf("master lost inside a transaction: %w", err)
			}
			if attempt > 0 || target == router.TargetMaster || bc == nil {
				return s.client.WriteErr(protocol.CRServerLost.New("Lost connection to %s while replaying session state: %v", describe(bc), err))
			}
			skip = bc.backend
			continue
		}
		if bc.pool != nil {
			bc.pool.queries.Add(1)
		}
		s.runningOn(bc)
		if bc.readOnly {
			// A refusal as a write is handed back, not relayed.
			bc.InterceptErr = protocol.ERReadOnlyTransaction.Code
		}
		res, err := run(bc)
		bc.InterceptErr = 0
		if bc.readOnly && res.Status&protocol.StatusSessionStateChg != 0 {
			// Something the statement ran (a stored function) changed the
			// connection's access mode or sql_mode: reset it before it
			// serves again.
			bc.tainted = true
		}
		if errors.Is(err, protocol.ErrIntercepted) {
			// A read-only replica connection refused the statement (1792)
			// before anything reached the client: nothing changed there.
			// sluice misjudged it as a read; the master runs it once.
			s.info.running.Store(nil)
			// The refusal stays in the connection's diagnostics area, where
			// a later statement that uses no table would still count it:
			// reset the connection before it serves again.
			bc.tainted = true
			if !refused {
				refused = true
				s.replicaRefused(bc)
				target, skip = router.TargetMaster, nil
				continue
			}
			s.ranOn(res, nil)
			s.rec.note(bc.backend, &res)
			return s.client.WriteErr(res.Err)
		}
		s.ranOn(res, err)
		s.rec.note(bc.backend, &res)
		if err == nil {
			// SHOW WARNINGS / @@error_count may ask about this one. A
			// question about the previous statement (SHOW COUNT(*)
			// WARNINGS, SELECT @@warning_count, SHOW WARNINGS itself)
			// leaves the server's diagnostics area as it was, and so does
			// a statement that names no table and raises nothing: the
			// warnings stay held, where they are (diagFrom), for the
			// question after it.
			keep := s.holdWarnings && s.rec.plan != nil && res.Warnings == 0 && res.Err == nil &&
				(s.rec.plan.FollowsPrevious || s.rec.plan.NoTables)
			if !keep {
				s.diagFrom = bc
			}
			s.holdWarnings = res.Warnings > 0 || res.Err != nil || keep
			s.noteScoped(bc, s.rec.plan, &res)
			if res.Err == nil && s.pendingTxWrite >= 0 && s.inTransaction() {
				// A sharded write went through: the transaction now
				// writes to this cluster only.
				s.txWrites = s.pendingTxWrite
			}
			s.absorbGTID(bc)
			if res.HasStatus {
				bc.status = res.Status
				s.lastStatus = res.Status
			}
			if after != nil {
				after(bc, res)
			}
			if s.replay.insertID != 0 {
				s.noteInsertIDUse(bc, res)
			}
			return nil
		}
		var se *protocol.SQLError
		if errors.As(err, &se) && res.Packets == 0 && !errors.Is(err, protocol.ErrBackendIO) {
			return s.client.WriteErr(se)
		}
		bc.broken = true
		s.dropIfBroken(bc)
		if errors.Is(err, protocol.ErrClientIO) {
			return err
		}
		b := bc.backend
		s.env.metrics.BackendErrs.WithLabelValues(b.Role.String()).Inc()
		if res.Torn {
			// The client holds half a packet: no ERR can follow it.
			s.log().Warn("backend lost mid-packet, closing the client", zap.String("backend", b.Address), zap.Error(err))
			return fmt.Errorf("backend %s lost mid-packet: %w", b.Address, err)
		}
		if b.Role == health.RoleMaster && bc.inTransaction() {
			// The transaction is gone with the connection. Going on would
			// run the rest of it in autocommit mode: end the session, as
			// a server that lost the connection would.
			_ = s.client.WriteErr(lostInTransaction(bc))
			return fmt.Errorf("master %s lost inside a transaction: %w", b.Address, err)
		}
		if b.Role == health.RoleReplica {
			// Reads avoid it while it does not answer its probes.
			s.lostOn = b
		}
		if res.Packets > 0 {
			s.log().Warn("backend lost mid-result", zap.String("backend", b.Address), zap.Error(err))
			return s.client.WriteErr(s.lostDuringQuery(bc))
		}
		// Nothing reached the client: the connection broke before the
		// backend answered. The prober, not one broken connection, decides
		// whether the backend is down.
		s.log().Warn("backend connection lost", zap.String("backend", b.Address), zap.String("role", b.Role.String()), zap.Error(err))
		if b.Role == health.RoleReplica && attempt == 0 {
			skip = b
			continue
		}
		return s.client.WriteErr(s.lostDuringQuery(bc))
	}
}

// absorbGTID takes the GTID of a transaction bc reported committed as the
// session's last one on the active cluster: causal reads wait for it.
func (s *Session) absorbGTID(bc *BackendConn) {
	if len(bc.LastGTID) > 0 {
		s.lastGTID = append(s.lastGTID[:0], bc.LastGTID...)
		bc.LastGTID = bc.LastGTID[:0]
		s.appliedOn = nil
	}
}

// followTopology loads the session's cluster from the current snapshot. When
// a failover published a new one, a master connection to a server that is no
// longer the master is dropped (inside a transaction the client gets the
// lostInTransaction ERR and the session ends, the returned error), and a
// replica connection or read replica that left the replicas is let go. The
// common case is one atomic load.
func (s *Session) followTopology() error {
	snap := s.env.topo.Current()
	if snap.Epoch == s.epoch {
		return nil
	}
	c := snap.Clusters[s.clusterIdx]
	s.cluster, s.epoch = c, snap.Epoch
	// A reload may have changed the cluster's consistency.
	s.consistency = consistencyOf(s.env.config().Cluster(c.Name).Consistency)
	if bc := s.master; bc != nil && bc.backend != c.Master {
		inTx := bc.inTransaction()
		s.master = nil
		s.forgetConn(bc)
		bc.discard()
		if inTx {
			_ = s.client.WriteErr(lostInTransaction(bc))
			return fmt.Errorf("master %s replaced by %s inside a transaction", bc.backend.Address, c.Master.Address)
		}
	}
	isReplica := func(b *health.Backend) bool {
		for _, r := range c.Replicas {
			if r == b {
				return true
			}
		}
		return false
	}
	if bc := s.replica; bc != nil && !isReplica(bc.backend) {
		s.replica = nil
		s.forgetConn(bc)
		bc.discard()
	}
	if s.readFrom != nil && !isReplica(s.readFrom) {
		s.readFrom = nil
	}
	return nil
}

// awaitMaster waits, when the cluster's master cannot take a statement (down,
// fenced, or writes refused) or failed is the master it could not connect to,
// for a snapshot whose master can, up to failover_write_wait, so writes
// pause through an automatic failover instead of failing. Without
// auto_failover it does not wait. It returns nil once the session's cluster
// (reloaded) has a master to try, else the ERR for the client.
func (s *Session) awaitMaster(failed *health.Backend, cause error) error {
	ready := func() bool {
		c := s.cluster
		if c.WritesRefused != "" || c.WritesHeld != "" {
			return false
		}
		if failed != nil && c.Master == failed {
			return false
		}
		return c.Master.Up()
	}
	s.cluster = s.env.topo.Current().Clusters[s.clusterIdx]
	if failed == nil && ready() {
		return nil
	}
	// The wait is for timers and the topology, not sockets: off the loop.
	if s.task.Detach() {
		defer s.task.Attach()
	}
	h := &s.env.config().Health
	wait := h.FailoverWriteWait.Duration
	if !h.AutoFailover || s.cluster.WritesRefused != "" {
		// Refused writes wait for nothing: no failover settles them.
		wait = 0
	}
	if s.cluster.WritesHeld != "" {
		wait = max(wait, HeldWriteWait(h))
	}
	var timer *time.Timer
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	// A master sluice could not connect to that a probe finds alive after
	// the failure was a blip: try it again.
	failedAt := time.Now()
	alive := func() bool {
		if failed == nil || s.cluster.Master != failed || !failed.Up() || s.cluster.WritesRefused != "" {
			return false
		}
		st := failed.Status()
		return st != nil && st.Time.After(failedAt)
	}
	for {
		changed := s.env.topo.Changed()
		s.markMasterBusy() // before the load: a switchover that misses it published first
		snap := s.env.topo.Current()
		s.cluster = snap.Clusters[s.clusterIdx]
		if ready() || alive() {
			return nil
		}
		s.unmarkMasterBusy()
		if timer == nil {
			if wait <= 0 {
				break
			}
			timer = time.NewTimer(wait)
			defer timer.Stop()
		}
		select {
		case <-changed:
			continue
		case <-tick.C:
			continue
		case <-s.env.ctx.Done():
		case <-timer.C:
		}
		break
	}
	c := s.cluster
	why := ""
	switch {
	case c.WritesRefused != "":
		why = c.WritesRefused
	case c.WritesHeld != "":
		why = fmt.Sprintf("writes held (%s) for longer than %v", c.WritesHeld, wait)
	case cause != nil:
		why = fmt.Sprintf("cannot connect to master %s: %v", c.Master.Address, cause)
	default:
		why = fmt.Sprintf("master %s is %s", c.Master.Address, c.Master.State())
		if e := c.Master.LastError(); e != "" {
			why += " (" + e + ")"
		}
	}
	if wait > 0 && c.WritesRefused == "" && c.WritesHeld == "" {
		why += fmt.Sprintf("; no failover gave it a master within failover_write_wait %v", wait)
	}
	return protocol.CRCouldNotConnect.New("sluice: cluster %s has no master to take the statement: %s", c.Name, why)
}

// backendFor returns the session's data connection for target, opening it
// on first use. Reads go to the session's replica (readFrom) while it is up
// (not lagging, down, fenced or offline) and no probe round ended since it
// was picked; otherwise the cluster's balancer picks an up replica (never
// skip). When none can serve, reads go to the master, or fail when the
// cluster has reads_fall_back_to_master = false.
func (s *Session) backendFor(target router.Target, skip *health.Backend) (*BackendConn, error) {
	if target == router.TargetReplica {
		if l := s.lostOn; l != nil && skip == nil {
			if l.Unresponsive(s.env.stallTimeout(), time.Now()) {
				skip = l
			} else {
				s.lostOn = nil
			}
		}
		causal := s.consistency == consistencyCausal && len(s.lastGTID) > 0 && !s.aside
		if r := s.replica; r != nil {
			if r.backend != skip && r.backend.Up() && (!causal || s.hasApplied(r.backend)) {
				return r, nil
			}
			s.putBack(r, s.pinned())
			s.replica = nil
		}
		// The session's replica comes first, so its reads do not go back
		// in time by landing on a replica that lags more than the last
		// one; once per probe round it is picked afresh, so balancing
		// follows the loads and states the round found.
		round := s.env.topo.Round()
		sticky := s.readFrom
		if sticky != nil && (s.aside || sticky == skip || !sticky.Up() || s.readRound != round) {
			sticky = nil
		}
		if causal && sticky != nil && !s.hasApplied(sticky) {
			sticky = nil
		}
		exhausted := false
		for range len(s.cluster.Replicas) + 1 {
			b := sticky
			sticky = nil
			if b == nil {
				if s.aside {
					b = s.cluster.PickReplicaAside(skip)
				} else {
					b = s.cluster.PickReplica(skip)
				}
			}
			if b == nil {
				break
			}
			if causal && !s.hasApplied(b) {
				// Not there yet: another replica may be, else the master.
				skip = b
				continue
			}
			bc, err := s.env.getConn(b.Address, s.key, s.schema == "", s.task)
			if err == nil {
				s.replica = bc
				if !s.aside {
					s.readFrom, s.readRound = b, round
				}
				return bc, nil
			}
			skip = b
			if errors.Is(err, errBackendGone) {
				// A reload removed it after this statement loaded the
				// topology.
				continue
			}
			if errors.Is(err, ErrPoolExhausted) {
				// Busy, not broken: try the next replica, then the master.
				s.log().Warn("replica pool exhausted", zap.String("backend", b.Address))
				exhausted = true
				continue
			}
			s.env.metrics.BackendErrs.WithLabelValues(b.Role.String()).Inc()
			from := b.State()
			if b.ReportFailure(err) {
				s.log().Warn("replica unreachable, taken out of rotation", zap.String("backend", b.Address), zap.Error(err))
				s.env.host.BackendStateChanged(b, from, health.StateDown, err.Error())
			}
		}
		// No replica can serve: reads go to the master, unless the
		// cluster says they must not (the login's schema check still may).
		if !s.cluster.ReadsFallBackToMaster && !s.aside && !causal && len(s.cluster.Replicas) > 0 {
			busy := ""
			if exhausted {
				busy = "; the pools of the replicas that are up are exhausted"
			}
			return nil, protocol.CRCouldNotConnect.New("sluice: no replica of cluster %s can serve the read (%s%s) and reads_fall_back_to_master is false",
				s.cluster.Name, s.cluster.ReplicaStates(), busy)
		}
	}
	s.markMasterBusy()
	if s.master != nil {
		if s.env.topo.Current().Clusters[s.clusterIdx].WritesHeld == "" || s.inTransaction() {
			return s.master, nil
		}
		if err := s.awaitMaster(nil, nil); err != nil {
			return nil, err
		}
		_ = s.followTopology() // not in a transaction: drops a master the switchover replaced
		if s.master != nil {
			return s.master, nil
		}
	}
	if c := s.env.topo.Current().Clusters[s.clusterIdx]; c.WritesRefused != "" || c.WritesHeld != "" || (s.env.config().Health.AutoFailover && !c.Master.Up()) {
		if err := s.awaitMaster(nil, nil); err != nil {
			return nil, err
		}
	}
	m := s.cluster.Master
	bc, err := s.env.getConn(m.Address, s.key, s.schema == "", s.task)
	if err != nil && !errors.Is(err, ErrPoolExhausted) && s.env.config().Health.AutoFailover {
		// The master may have just died: wait for the probes to say so
		// and a failover to replace it, then try the master of the
		// snapshot that ends the wait.
		if werr := s.awaitMaster(m, err); werr != nil {
			return nil, werr
		}
		m = s.cluster.Master
		bc, err = s.env.getConn(m.Address, s.key, s.schema == "", s.task)
	}
	if errors.Is(err, ErrPoolExhausted) {
		return nil, protocol.ERConCount.New("Too many connections: sluice has no free connection to master %s of cluster %s: %v", m.Address, s.cluster.Name, err)
	}
	if err != nil {
		s.env.metrics.BackendErrs.WithLabelValues(m.Role.String()).Inc()
		s.log().Warn("master unreachable", zap.String("backend", m.Address), zap.Error(err))
		var se *protocol.SQLError
		if errors.As(err, &se) {
			return nil, protocol.CRCouldNotConnect.New("sluice: master %s of cluster %s refused the service account: %s", m.Address, s.cluster.Name, se.Message)
		}
		return nil, protocol.CRCouldNotConnect.New("sluice: cannot connect to master %s of cluster %s: %v", m.Address, s.cluster.Name, err)
	}
	s.master = bc
	return bc, nil
}

// hasApplied reports whether replica b had applied the session's last
// committed transaction when it was last probed (causal reads). The answer
// for the session's replica is kept until the session writes again or
// re-picks, so a read parses GTIDs at most once per probe round.
func (s *Session) hasApplied(b *health.Backend) bool {
	if s.appliedOn == b && s.appliedRound == s.env.topo.Round() {
		return true
	}
	st := b.Status()
	if st == nil {
		return false
	}
	have, err := health.ParseGTID(st.Flavor, st.AppliedGTID)
	if err != nil {
		return false
	}
	want, err := health.ParseGTID(st.Flavor, string(s.lastGTID))
	if err != nil || !have.Contains(want) {
		return false
	}
	s.appliedOn, s.appliedRound = b, s.env.topo.Round()
	return true
}

// sync replays the session state bc lacks: schema, multi-statement option
// and SET variables made since bc last caught up.
func (s *Session) sync(bc *BackendConn) error {
	if s.schema != "" && bc.schema != s.schema {
		if err := bc.simpleCommand(bc.command(protocol.ComInitDB, s.schema), protocol.ResponseSingle); err != nil {
			return err
		}
		bc.schema = s.schema
	}
	if bc.multiStmts != s.multiStmts {
		opt := protocol.OptionMultiStatementsOff
		if s.multiStmts {
			opt = protocol.OptionMultiStatementsOn
		}
		if err := bc.simpleCommand(append(bc.command(protocol.ComSetOption, ""), byte(opt), byte(opt>>8)), protocol.ResponseSingle); err != nil {
			return err
		}
		bc.multiStmts = s.multiStmts
	}
	// bc's SET statements must be a prefix of the session's; otherwise
	// they are another session's (or an older order of this one's): reset
	// and replay all. A read-only connection that now serves as a master
	// (its replica was promoted) starts afresh too: its replayed state
	// lacks the access mode assignments it skipped as a replica.
	replica := bc.backend.Role == health.RoleReplica
	same := len(bc.vars) <= len(s.vars) && (replica || !bc.readOnly) && !bc.tainted
	for i := 0; same && i < len(bc.vars); i++ {
		same = bc.vars[i] == s.vars[i].SQL
	}
	if !same {
		if !bc.reset(s.env.config().Proxy.ConnectTimeout.Duration) {
			bc.broken = true
			return fmt.Errorf("%w: COM_RESET_CONNECTION failed", protocol.ErrBackendIO)
		}
	}
	for i := len(bc.vars); i < len(s.vars); i++ {
		v := s.vars[i]
		if replica && v.Name == "transaction_read_only" {
			// A replica connection stays read-only whatever the session
			// chose; its own value is the master connection's.
			bc.vars = append(bc.vars, v.SQL)
			continue
		}
		if err := bc.simpleCommand(bc.command(protocol.ComQuery, v.SQL), protocol.ResponseResult); err != nil {
			var se *protocol.SQLError
			if !errors.As(err, &se) {
				return err
			}
			// The master took it, this server does not: stop replaying
			// it, so the session does not fail forever, and say which
			// server refused what.
			s.dropVar(v.Name)
			s.log().Warn("session variable not replayable", zap.String("variable", v.Name),
				zap.String("backend", bc.backend.Address), zap.Uint16("code", se.Code))
			return protocol.NewError(se.Code, "sluice could not apply the session's %s on %s: %s",
				v.Name, describe(bc), se.Message)
		}
		bc.vars = append(bc.vars, v.SQL)
	}
	if replica && !bc.readOnly {
		// A master connection that now serves a demoted server.
		if err := bc.setReadOnly(); err != nil {
			return err
		}
	}
	return s.beginIfPending(bc)
}

// dropIfBroken forgets and closes bc when it is broken.
func (s *Session) dropIfBroken(bc *BackendConn) {
	if bc == nil || !bc.broken {
		return
	}
	s.eachLeg(func(l *clusterLeg) {
		if l.master == bc {
			l.master = nil
		}
		if l.replica == bc {
			l.replica = nil
		}
	})
	s.forgetConn(bc)
	bc.discard()
}

// putBack returns bc to its pool; reset clears state that cannot be
// replayed first.
func (s *Session) putBack(bc *BackendConn, reset bool) {
	s.forgetConn(bc)
	if bc.pool == nil || s.pins&router.PinRole != 0 {
		// A role set with SET ROLE survives COM_RESET_CONNECTION: only
		// closing the connection keeps it from the next borrower.
		bc.discard()
		return
	}
	if reset {
		bc.pool.PutReset(bc)
	} else {
		bc.pool.Put(bc)
	}
}

// release returns the data connections of every leg to their pools.
func (s *Session) release(reset bool) {
	s.eachLeg(func(l *clusterLeg) {
		if l.master != nil {
			s.putBack(l.master, reset)
			l.master = nil
		}
		if l.replica != nil {
			s.putBack(l.replica, reset)
			l.replica = nil
		}
		l.txBegun = false
	})
}

// pinned reports whether the session must keep its connections: an open
// transaction (or autocommit off), state a statement left that cannot be
// replayed (router.Pin), prepared statements, or warnings of the last
// statement a SHOW WARNINGS may still ask about.
func (s *Session) pinned() bool {
	return s.inTransaction() || s.pins != 0 || len(s.stmts) > 0 || s.holdWarnings || s.replay.insertID != 0
}

// afterCommand gives the connections back to the pools between statements
// unless the session is pinned, so many clients share few connections.
func (s *Session) afterCommand() {
	if s.masterBusy.Load() != 0 && !s.inTransaction() {
		s.masterBusy.Store(0)
	}
	if !s.pinned() {
		s.release(false)
	}
	s.publishInfo()
}

func (s *Session) writeOK() error {
	st := s.status()
	s.scratch = protocol.AppendOK(s.scratch[:0], protocol.OK{Status: st})
	return s.client.WritePacketFlush(s.scratch)
}

// status is the server status sluice reports in answers it makes itself:
// the active master's last flags, with a transaction sharding has not yet
// started on any cluster shown as open.
func (s *Session) status() uint16 {
	// Without a master connection the session is in no transaction and
	// has autocommit on (either would pin one); NO_BACKSLASH_ESCAPES
	// follows its sql_mode, as the last backend reply showed it.
	st := protocol.StatusAutocommit | s.lastStatus&protocol.StatusNoBackslashEscape
	if s.master != nil {
		st = s.master.status &^ protocol.StatusMoreResultsExists
	}
	if s.txBegin != "" {
		st |= protocol.StatusInTrans
	}
	return st
}

// close ends the session: data connections go back to their pools, reset
// when the session left state on them.
func (s *Session) close() {
	s.releaseUser()
	s.reauth.Close()
	if s.lims.queryTimer != nil {
		s.lims.queryTimer.Stop()
	}
	s.release(s.inTransaction() || s.pins != 0 || len(s.stmts) > 0 || s.replay.insertID != 0)
	_ = s.client.Close()
}

// inTransaction reports whether bc's last status flags show an open
// transaction or autocommit off.
func (bc *BackendConn) inTransaction() bool {
	return bc.status&protocol.StatusInTrans != 0 || bc.status&protocol.StatusAutocommit == 0
}

// lostInTransaction is the ERR for a master connection that broke while the
// client had a transaction open on it.
func lostInTransaction(bc *BackendConn) *protocol.SQLError {
	return protocol.CRServerLost.New("Lost connection to master %s inside a transaction; the transaction was rolled back and this connection is closed",
		bc.backend.Address)
}

// describe names a backend connection's role and address for messages.
func describe(bc *BackendConn) string {
	if bc == nil {
		return "backend"
	}
	return bc.backend.Role.String() + " " + bc.backend.Address
}

// noteResult keeps what SELECT LAST_INSERT_ID() and ROW_COUNT() report,
// as the server would for this session: the first id the last INSERT
// generated, and the rows the previous statement changed (-1 after a
// result set, as the server says).
func (s *Session) noteResult(res protocol.RelayResult) {
	s.scoped.stmtSeq++
	switch {
	case res.Err != nil:
		s.rowCount = -1
	case res.Columns:
		s.rowCount = -1
	default:
		s.rowCount = int64(res.OK.AffectedRows)
		if res.OK.LastInsertID != 0 {
			s.lastInsertID = res.OK.LastInsertID
			s.scoped.lidSeq++
			s.scoped.lidStale = false
		}
	}
}

// answerLocal answers SELECT LAST_INSERT_ID() / SELECT ROW_COUNT() from the
// session's own record: the connection that ran the INSERT may be serving
// another client by now.
func (s *Session) answerLocal(plan *router.Plan) error {
	st := s.status()
	var v []byte
	var flags uint16 = protocol.FlagNotNull | protocol.FlagBinary
	switch plan.Local {
	case router.LocalLastInsertID:
		v = strconv.AppendUint(s.scratch2[:0], s.lastInsertID, 10)
		flags |= protocol.FlagUnsigned
	default:
		v = strconv.AppendInt(s.scratch2[:0], s.rowCount, 10)
	}
	s.scratch2 = v
	var err error
	s.scratch, err = protocol.WriteSingleValue(s.client, s.scratch, plan.LocalName, protocol.TypeLongLong, flags, 21, v, st)
	// To the client this was a SELECT of one row.
	s.answeredLocally(1)
	return err
}

// pin adds sticky pins and counts each reason the first time it pins this
// session.
func (s *Session) pin(p router.Pin) {
	if added := p &^ s.pins; added != 0 {
		for bit, name := range router.PinNames {
			if added&bit != 0 {
				s.env.metrics.Pins.WithLabelValues(name).Inc()
			}
		}
		s.pins |= p
	}
}

// consistency is what a session's reads may see ([[cluster]] consistency).
type consistency uint8

const (
	// consistencyEventual: any serving replica.
	consistencyEventual consistency = iota
	// consistencyCausal: after a session's write, only replicas that have
	// applied it; the master until one has.
	consistencyCausal
	// consistencyStrong: the master.
	consistencyStrong
)

func consistencyOf(s string) consistency {
	switch s {
	case "causal":
		return consistencyCausal
	case "strong":
		return consistencyStrong
	}
	return consistencyEventual
}

// NewSession returns the session of client connection nc, numbered id
// (Registry.NewID). The server then registers its Handle, calls Start and
// serves it with ServeAll or ServeOn, and calls End once it is over.
func NewSession(env *Env, id uint32, nc net.Conn) *Session { return newSession(env, id, nc) }

// Start logs the client in; it reports whether the session is to be
// served.
func (s *Session) Start(ctx context.Context) bool { return s.start(ctx) }

// ServeAll serves the client's commands until it leaves (start is when it
// connected).
func (s *Session) ServeAll(start time.Time) { s.serveAll(start) }

// ServeOn serves the session as task t of an event loop, its client
// connection lc bound to t.
func (s *Session) ServeOn(t *evloop.Task, lc *evloop.Conn, start time.Time) {
	s.task = t
	lc.Bind(t)
	s.serveAll(start)
}

// End releases what the session holds once it is over.
func (s *Session) End() { s.close() }

// Log is a logger with the session's fields.
func (s *Session) Log() *zap.Logger { return s.log() }

// NetConn is the client connection (for the server to hand the session to
// an event loop).
func (s *Session) NetConn() net.Conn { return s.client.NetConn() }
