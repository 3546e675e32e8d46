package admin

import (
	"fmt"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/sluice-proxy/sluice/conf"
	"github.com/sluice-proxy/sluice/protocol"
	"github.com/sluice-proxy/sluice/router"
)

// The firewall's admin commands: SHOW FIREWALL [FOR '<user>'],
// FIREWALL ALLOW <digest id> FOR '<user>', FIREWALL FORGET <digest id> FOR
// '<user>' and FIREWALL FORGET ALL FOR '<user>'. Changes apply to the next
// statement of the user's sessions and are on disk (proxy.state_dir)
// before the command returns.

// maxUserName bounds a user name in FIREWALL commands (MariaDB's own
// limit is 128 characters).
const maxUserName = 128

// showFirewall parses the rest of SHOW FIREWALL [FOR '<user>'].
func (p *adminParser) showFirewall(cmd *adminCommand) error {
	cmd.kind = adminShowFirewall
	if !p.accept("FOR") {
		return nil
	}
	var err error
	cmd.user, err = p.userName("SHOW FIREWALL FOR")
	return err
}

// firewall parses the rest of FIREWALL ALLOW | FORGET.
func (p *adminParser) firewall(cmd *adminCommand) error {
	switch {
	case p.accept("ALLOW"):
		cmd.kind = adminFirewallAllow
	case p.accept("FORGET"):
		cmd.kind = adminFirewallForget
		if p.accept("ALL") {
			cmd.kind = adminFirewallForgetAll
		}
	default:
		return p.expected("ALLOW <digest id> or FORGET <digest id> | ALL after FIREWALL")
	}
	if cmd.kind != adminFirewallForgetAll {
		id, err := p.digestID()
		if err != nil {
			return err
		}
		cmd.digest = id
	}
	if !p.accept("FOR") {
		return p.expected("FOR '<user>'")
	}
	var err error
	cmd.user, err = p.userName("FIREWALL ... FOR")
	return err
}

// digestID reads a digest id as SHOW QUERY DIGESTS prints it (digest_id):
// 16 hex digits, bare or quoted, with or without 0x.
func (p *adminParser) digestID() (uint64, error) {
	if p.i >= len(p.toks) {
		return 0, p.expected("a digest id (16 hex digits, the digest_id of SHOW QUERY DIGESTS)")
	}
	t := p.toks[p.i].text
	id, ok := router.ParseDigestID(t)
	if !ok {
		return 0, fmt.Errorf("%w: the digest id must be 16 hex digits, the digest_id of SHOW QUERY DIGESTS (got %q)", errAdminSyntax, t)
	}
	p.i++
	return id, nil
}

// userName reads a user name, quoted or a bare word, after what.
func (p *adminParser) userName(what string) (string, error) {
	if p.i >= len(p.toks) || (p.toks[p.i].kind != tokString && p.toks[p.i].kind != tokWord) {
		return "", p.expected("a user name after " + what)
	}
	u := p.toks[p.i].text
	p.i++
	if u == "" || len(u) > maxUserName {
		return "", fmt.Errorf("%w: a user name after %s must have 1 to %d characters (got %d)", errAdminSyntax, what, maxUserName, len(u))
	}
	return u, nil
}

// runFirewall carries out a parsed firewall command.
func (p *Port) runFirewall(a *session, cmd adminCommand) (*Table, string, error) {
	allow := p.ctl.Firewall()
	ids := router.FormatDigestID(cmd.digest)
	var info, event string
	switch cmd.kind {
	case adminShowFirewall:
		return ShowFirewall(p.ctl, cmd.user), "", nil
	case adminFirewallAllow:
		added, err := allow.Allow(cmd.user, cmd.digest, "", time.Now())
		if err != nil { // a full allowlist
			return nil, "", protocol.ERUnknownError.New("sluice admin: FIREWALL ALLOW: %v", err)
		}
		if !added {
			return nil, fmt.Sprintf("digest_id %s is already on the allowlist of '%s'", ids, cmd.user), nil
		}
		info = fmt.Sprintf("digest_id %s allowed for '%s'", ids, cmd.user)
		if mode, _ := p.ctl.Config().Firewall.ModeFor(cmd.user); mode != conf.FirewallEnforce {
			info += fmt.Sprintf(" (the user's firewall mode is %s: the allowlist refuses nothing until it is enforce)", mode)
		}
		event = "allow " + ids + " for '" + cmd.user + "'"
	case adminFirewallForget:
		if !allow.Forget(cmd.user, cmd.digest) {
			return nil, "", protocol.ERUnknownError.New("sluice admin: FIREWALL FORGET: digest_id %s is not on the allowlist of '%s' (SHOW FIREWALL FOR '%s' lists it)",
				ids, cmd.user, cmd.user)
		}
		info = fmt.Sprintf("digest_id %s forgotten for '%s'", ids, cmd.user)
		event = "forget " + ids + " for '" + cmd.user + "'"
	case adminFirewallForgetAll:
		n := allow.ForgetAll(cmd.user)
		info = fmt.Sprintf("%d digests forgotten for '%s'", n, cmd.user)
		event = fmt.Sprintf("forget all (%d digests) for '%s'", n, cmd.user)
	}
	a.log.Info("admin: firewall", zap.String("change", event))
	p.ctl.Event("firewall", "", "", event)
	if err := p.ctl.SaveFirewall(); err != nil {
		return nil, "", err
	}
	return nil, info, nil
}

// ShowFirewall builds SHOW FIREWALL: every digest on the allowlists of
// user ("" for every user), by user then digest text, with the user's
// mode, how the digest got there and when (UTC), and the statements it
// let through.
func ShowFirewall(ctl Control, user string) *Table {
	r := &Table{Columns: []string{"user", "mode", "digest_id", "digest", "source", "learned_at", "hits"}}
	allow := ctl.Firewall()
	fw := &ctl.Config().Firewall
	users := allow.Users()
	if user != "" {
		users = []string{user}
	}
	for _, u := range users {
		mode, _ := fw.ModeFor(u)
		for _, e := range allow.Entries(u) {
			r.Rows = append(r.Rows, []string{u, mode, router.FormatDigestID(e.ID), e.Digest, e.Source.String(),
				e.At.UTC().Format("2006-01-02 15:04:05.000"), strconv.FormatUint(e.Hits(), 10)})
		}
	}
	return r
}
