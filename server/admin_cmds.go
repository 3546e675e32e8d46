package server

import (
	"github.com/sluice-proxy/sluice/protocol"
	"go.uber.org/zap"
)

func noSuchSession(id uint32) *protocol.SQLError {
	return protocol.ERNoSuchThread.New("Unknown thread id: %d (SHOW SESSIONS lists the client sessions)", id)
}

// killConnection closes client session id; its goroutine ends the session
// as for a client that went away.
func (srv *Server) killConnection(id uint32) error {
	h := srv.env.Registry().ByID(id)
	if h == nil {
		return noSuchSession(id)
	}
	srv.log.Info("admin: killing client session", zap.Uint32("conn_id", id))
	return h.Close()
}

// killQuery kills the statement session id runs: KILL QUERY of the backend
// thread that runs it, sent on a connection of its own (the session's is
// busy). The client then gets the server's own ERR 1317. A session running
// nothing is left alone.
func (srv *Server) killQuery(id uint32) error {
	h := srv.env.Registry().ByID(id)
	if h == nil {
		return noSuchSession(id)
	}
	backend, thread, ran, err := srv.env.KillQuery(h)
	if err != nil {
		if se, ok := err.(*protocol.SQLError); ok {
			return se // the server refused the KILL
		}
		return protocol.CRCouldNotConnect.New("sluice admin: KILL QUERY %d: %v", id, err)
	}
	if ran {
		srv.log.Info("admin: killed a statement", zap.Uint32("conn_id", id), zap.String("backend", backend), zap.Uint32("thread_id", thread))
	}
	return nil
}
