package proxy

import (
	"github.com/sluice-proxy/sluice/protocol"
	"go.uber.org/zap"
)

// sessionByID returns the client session id, or nil.
func (s *Server) sessionByID(id uint32) *Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[id]
}

func noSuchSession(id uint32) *protocol.SQLError {
	return protocol.NewError(ErNoSuchThread, "Unknown thread id: %d (SHOW SESSIONS lists the client sessions)", id)
}

// killConnection closes client session id; its goroutine ends the session
// as for a client that went away.
func (s *Server) killConnection(id uint32) error {
	sess := s.sessionByID(id)
	if sess == nil {
		return noSuchSession(id)
	}
	s.log.Info("admin: killing client session", zap.Uint32("conn_id", id))
	return sess.client.Close()
}

// killQuery kills the statement session id runs: KILL QUERY of the backend
// thread that runs it, sent on a connection of its own (the session's is
// busy). The client then gets the server's own ERR 1317. A session running
// nothing is left alone.
func (s *Server) killQuery(id uint32) error {
	sess := s.sessionByID(id)
	if sess == nil {
		return noSuchSession(id)
	}
	run := sess.info.running.Load()
	if run == nil {
		return nil
	}
	err := s.killBackendQuery(run, func() bool { return sess.info.running.Load() == run })
	if err != nil {
		if se, ok := err.(*protocol.SQLError); ok {
			return se // the server refused the KILL
		}
		return protocol.NewError(protocol.ErCouldNotConnect, "sluice admin: KILL QUERY %d: %v", id, err)
	}
	p := run.pool
	s.log.Info("admin: killed a statement", zap.Uint32("conn_id", id), zap.String("backend", p.addr), zap.Uint32("thread_id", run.threadID))
	return nil
}

// ErNoSuchThread is ER_NO_SUCH_THREAD, the answer to KILL of an unknown id.
const ErNoSuchThread uint16 = 1094
