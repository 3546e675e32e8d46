// Package fleet owns this instance's place in a fleet of sluices that share
// an etcd cluster ([fleet] in the configuration): the etcd client, the
// instance's membership key and the view of every member.
//
// Membership is a key <prefix>/members/<instance> holding the instance's
// Member record as JSON, bound to a lease that a concurrency.Session keeps
// alive. Close revokes the lease, so the key goes away at once; an instance
// that dies leaves it until session_ttl has passed. When the session is lost
// (etcd unreachable for longer than the lease), a new lease and key are made
// as soon as etcd answers again. The view of the members is read once and
// then followed with a watch, so Members reflects a change within a moment.
//
// Nothing on a client's path waits for etcd: the package runs its own
// goroutines, and what it exposes (Members, Up, Registered) reads memory
// only. An etcd outage shows in Up (sluice_fleet_etcd_up) and the log, never
// in a statement. The server starts a Fleet only when [fleet] names etcd
// endpoints.
//
// A Fleet is safe for concurrent use; Close may be called once.
package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sluice-proxy/sluice/conf"
)

// Member is one instance of the fleet as its membership key describes it.
type Member struct {
	// Instance is the member's name, the last segment of its key.
	Instance string `json:"instance"`
	// Address and AdminAddress are its data and admin listeners.
	Address      string `json:"address"`
	AdminAddress string `json:"admin_address"`
	// Version is the sluice version it runs.
	Version string `json:"version"`
	// ConfigRevision is the etcd revision of the fleet configuration it
	// applied; 0 while configuration is not pushed through etcd.
	ConfigRevision int64 `json:"config_revision"`
	// Started is when the instance started.
	Started time.Time `json:"started"`
	// Lease is the etcd lease its key is bound to (not stored in the value).
	Lease int64 `json:"-"`
}

// Fleet is this instance's membership in the fleet and its view of the
// others, owned by the server that built it. Build it with New, run it
// with Start, end it with Close (each once); the other methods are safe
// for concurrent use at any time and never wait for etcd, except LeaseTTL,
// which asks it.
type Fleet struct {
	cfg  conf.Fleet
	self Member
	log  *zap.Logger
	// clientCfg builds the client; client is set once connect has it.
	clientCfg clientv3.Config
	client    atomic.Pointer[clientv3.Client]
	// key is this instance's membership key; membersPrefix ends in "/".
	key, membersPrefix string
	// probeTimeout bounds each request to etcd.
	probeTimeout time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	up            atomic.Bool
	registered    atomic.Bool
	registrations atomic.Uint64
	// lost tells register that the view found this instance's key gone
	// while its session lives (someone deleted it); buffered, one slot.
	lost chan struct{}

	mu      sync.Mutex
	members map[string]Member // the view, by instance

	// applyBackend applies the fleet's backend settings (OnBackend, set
	// before Start); settingsMu orders the applies, and applied holds the
	// revision applied last for each settings key.
	applyBackend ApplyFunc
	settingsMu   sync.Mutex
	applied      map[string]appliedSetting
	// applyConfig applies pushed configurations (OnConfig); nil leaves the
	// configuration key unwatched. offered is the newest revision handed
	// to it, touched only by followConfig's goroutine.
	applyConfig ApplyConfig
	offered     int64
	// configRev is the applied configuration revision, which the
	// membership record carries; refresh tells register to rewrite the
	// record after it changed (buffered, one slot).
	configRev atomic.Int64
	refresh   chan struct{}
	// rejected is the last refused revision and its error, under rejectMu.
	rejectMu    sync.Mutex
	rejected    int64
	rejectedWhy string

	// hooks are the topology's (OnTopology). sess is the live membership session the
	// elections campaign under, and sessChanged is closed and replaced when it changes, both
	// under sessMu. leads are the clusters this instance leads and leadLost what abdicate
	// signals to end one, under leadMu. topoRev is
	// the topology revision applied per cluster, under topoMu, which also orders the
	// applies and the guarded writes.
	hooks       Hooks
	sessMu      sync.Mutex
	sess        *concurrency.Session
	sessChanged chan struct{}
	leadMu      sync.Mutex
	leads       map[string]Lead
	leadLost    map[string]chan struct{}
	topoMu      sync.Mutex
	topoRev     map[string]int64
	// topoLoaded is closed once the topology records were read whole the first time.
	topoLoaded chan struct{}
	loadedOnce sync.Once
}

// New prepares the etcd client for cfg (an enabled [fleet]); self is this
// instance's record, Instance set. It does not talk to etcd, and fails only
// on what no retry can fix: unreadable TLS files.
func New(cfg *conf.Fleet, self Member, log *zap.Logger) (*Fleet, error) {
	if !cfg.Enabled() {
		return nil, errors.New("fleet: [fleet] has no etcd endpoints")
	}
	if self.Instance == "" {
		return nil, errors.New("fleet: the instance has no name")
	}
	tlsConf, err := clientTLS(cfg)
	if err != nil {
		return nil, err
	}
	dial := cfg.DialTimeout.Duration
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{
		cfg: *cfg, self: self, log: log.With(zap.String("instance", self.Instance)),
		membersPrefix: cfg.Prefix + "/members/",
		probeTimeout:  min(dial, 3*time.Second),
		ctx:           ctx, cancel: cancel,
		members: map[string]Member{},
		lost:    make(chan struct{}, 1),
		applied: map[string]appliedSetting{},
		refresh: make(chan struct{}, 1),

		sessChanged: make(chan struct{}),
		leads:       map[string]Lead{},
		leadLost:    map[string]chan struct{}{},
		topoRev:     map[string]int64{},
		topoLoaded:  make(chan struct{}),
	}
	f.key = f.membersPrefix + self.Instance
	f.clientCfg = clientv3.Config{
		Endpoints:   cfg.Etcd,
		DialTimeout: dial,
		// Find a dead member's connection quickly and move to another.
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: dial,
		TLS:                  tlsConf,
		Username:             cfg.EtcdUser,
		Password:             cfg.EtcdPassword,
		// The client's own retries are chatty while etcd is away; sluice
		// logs the outage itself, once.
		Logger: log.Named("etcd").WithOptions(zap.IncreaseLevel(zapcore.ErrorLevel)),
	}
	return f, nil
}

// clientTLS reads [fleet]'s CA and client certificate; nil without TLS.
func clientTLS(cfg *conf.Fleet) (*tls.Config, error) {
	if !cfg.UsesTLS() {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.EtcdCA != "" {
		pem, err := os.ReadFile(cfg.EtcdCA)
		if err != nil {
			return nil, fmt.Errorf("fleet: etcd_ca: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet: etcd_ca: no PEM certificate in %s", cfg.EtcdCA)
		}
	}
	if cfg.EtcdCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.EtcdCert, cfg.EtcdKey)
		if err != nil {
			return nil, fmt.Errorf("fleet: etcd_cert and etcd_key: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// Start runs the membership, the view and the etcd probe in the
// background; it returns at once, whether etcd answers or not.
func (f *Fleet) Start() {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if !f.connect() {
			return
		}
		f.wg.Add(3)
		go func() { defer f.wg.Done(); f.register() }()
		go func() { defer f.wg.Done(); f.follow() }()
		go func() { defer f.wg.Done(); f.probe() }()
		if f.applyBackend != nil {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.followBackends() }()
		}
		if f.applyConfig != nil {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.followConfig() }()
		}
		if f.hooks.Apply != nil {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.followTopology() }()
		}
		for _, c := range f.hooks.Clusters {
			f.wg.Add(1)
			go func() { defer f.wg.Done(); f.campaign(c) }()
		}
	}()
}

// connect makes the client. Without etcd auth that never waits for etcd;
// with it the client logs in at once, so while etcd does not answer (or
// refuses the login) connect logs that and tries again. It reports false
// when the Fleet closed first.
func (f *Fleet) connect() bool {
	wait := 100 * time.Millisecond
	for logged := false; ; {
		c, err := clientv3.New(f.clientCfg)
		if err == nil {
			f.client.Store(c)
			return true
		}
		if f.ctx.Err() != nil {
			return false
		}
		if !logged {
			f.log.Warn("fleet: cannot log in to etcd; this instance serves without the fleet and keeps trying",
				zap.Strings("etcd", f.cfg.Etcd), zap.String("etcd_user", f.cfg.EtcdUser), zap.Error(err))
			logged = true
		}
		if !f.pause(wait) {
			return false
		}
		wait = backoff(wait)
	}
}

// cli is the client; only the goroutines connect starts, which run once
// it is set, call it.
func (f *Fleet) cli() *clientv3.Client { return f.client.Load() }

// Close leaves the fleet: the membership lease is revoked (the key goes
// away at once when etcd answers within dial_timeout), the goroutines end
// and the client closes. A login to etcd in progress (etcd_user) is waited
// for, at most dial_timeout.
func (f *Fleet) Close() error {
	f.cancel()
	f.wg.Wait()
	if c := f.cli(); c != nil {
		return c.Close()
	}
	return nil
}

// Self is this instance's record as it registers it.
func (f *Fleet) Self() Member {
	m := f.self
	m.ConfigRevision = f.configRev.Load()
	return m
}

// Up reports whether etcd answered the last quorum read (every second).
func (f *Fleet) Up() bool { return f.up.Load() }

// Registered reports whether this instance's membership key is held by a
// live session.
func (f *Fleet) Registered() bool { return f.registered.Load() }

// Registrations counts the membership keys written since Start: 1 after
// joining, one more for each re-registration after a lost lease.
func (f *Fleet) Registrations() uint64 { return f.registrations.Load() }

// Members is the view of the fleet, by instance name. While etcd is
// unreachable it is the last view read.
func (f *Fleet) Members() []Member {
	f.mu.Lock()
	out := make([]Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	f.mu.Unlock()
	sortMembers(out)
	return out
}

// LeaseTTL asks etcd how long the lease of a member's key has left; an
// error when etcd does not answer within dial_timeout (or ctx's end).
func (f *Fleet) LeaseTTL(ctx context.Context, lease int64) (time.Duration, error) {
	c := f.cli()
	if c == nil {
		return 0, errors.New("fleet: not connected to etcd yet")
	}
	ctx, cancel := context.WithTimeout(ctx, f.probeTimeout)
	defer cancel()
	resp, err := c.TimeToLive(ctx, clientv3.LeaseID(lease))
	if err != nil {
		return 0, fmt.Errorf("fleet: lease %x: %w", lease, err)
	}
	if resp.TTL < 0 {
		return 0, fmt.Errorf("fleet: lease %x has expired", lease)
	}
	return time.Duration(resp.TTL) * time.Second, nil
}

// probe reads etcd with a quorum read every second (or a third of the
// lease, when shorter) and keeps Up, logging each change once.
func (f *Fleet) probe() {
	every := min(time.Second, f.cfg.SessionTTL.Duration/3)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(f.ctx, f.probeTimeout)
		_, err := f.cli().Get(ctx, f.key, clientv3.WithCountOnly())
		cancel()
		if f.ctx.Err() != nil {
			return
		}
		was := f.up.Swap(err == nil)
		switch {
		case err == nil && !was:
			f.log.Info("fleet: etcd answers", zap.Strings("etcd", f.cfg.Etcd))
		case err != nil && was:
			f.log.Warn("fleet: etcd does not answer; this instance keeps serving and rejoins when it returns",
				zap.Strings("etcd", f.cfg.Etcd), zap.Error(err))
		}
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pause waits d, or less when the Fleet closes; it reports whether to go on.
func (f *Fleet) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// backoff doubles d up to two seconds.
func backoff(d time.Duration) time.Duration { return min(2*d, 2*time.Second) }
