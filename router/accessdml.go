package router

import (
	"slices"
	"strings"

	"github.com/pingcap/tidb/pkg/parser/ast"
)

// target is the one table an INSERT or a single-table UPDATE/DELETE names.
func target(refs *ast.TableRefsClause) *ast.TableName {
	if refs == nil || refs.TableRefs == nil || refs.TableRefs.Right != nil {
		return nil
	}
	ts, ok := refs.TableRefs.Left.(*ast.TableSource)
	if !ok {
		return nil
	}
	t, _ := ts.Source.(*ast.TableName)
	return t
}

// insert adds INSERT's and REPLACE's Needs: INSERT on the columns listed
// (on the whole table without a list), DELETE too for REPLACE, UPDATE on
// the columns ON DUPLICATE KEY UPDATE assigns, SELECT on what is read.
func (x *extractor) insert(s *ast.InsertStmt) bool {
	t := target(s.Table)
	if t == nil {
		x.sources(s.Table.TableRefs, PrivInsert, nil)
		return true
	}
	whole := PrivInsert
	if s.IsReplace {
		whole = PrivDelete
		if len(s.Columns) == 0 && !s.Setlist {
			whole |= PrivInsert
		}
	} else if len(s.Columns) > 0 || s.Setlist {
		whole = 0
	}
	x.table(t, whole, PrivInsert)
	if len(s.OnDuplicate) > 0 {
		x.table(t, 0, PrivUpdate)
	}
	scope := []source{{ref: t.Name.L, db: t.Schema.O, table: t.Name.O}}
	if s.Select != nil {
		x.query(s.Select)
		if len(s.OnDuplicate) > 0 {
			// ON DUPLICATE KEY UPDATE may read the SELECT's tables.
			sel, ok := s.Select.(*ast.SelectStmt)
			if !ok || sel.With != nil {
				return false
			}
			if sel.From != nil && sel.From.TableRefs != nil {
				scope = x.sources(sel.From.TableRefs, PrivSelect, scope)
			}
		}
	}
	x.withScope(scope, func() {
		if len(s.OnDuplicate) > 0 {
			// The row may be updated instead: MariaDB asks UPDATE of
			// every column listed, before INSERT.
			for _, c := range s.Columns {
				x.colNeed(scope[0], c, PrivUpdate)
			}
		}
		for _, c := range s.Columns {
			x.colNeed(scope[0], c, PrivInsert)
		}
		for _, row := range s.Lists {
			for _, e := range row {
				x.expr(e, PrivSelect)
			}
		}
		for _, a := range s.OnDuplicate {
			// The target's column, whatever else is in scope.
			x.colNeed(scope[0], a.Column, PrivUpdate)
			x.expr(a.Expr, PrivSelect)
		}
	})
	return true
}

// update adds UPDATE's Needs: UPDATE on the columns assigned, SELECT on
// the columns read and on the tables only read.
func (x *extractor) update(s *ast.UpdateStmt) {
	x.withCTEs(s.With, func() {
		scope := x.sources(s.TableRefs.TableRefs, 0, nil)
		if s.MultipleTable || s.TableRefs.TableRefs.Right != nil {
			// A multi-table UPDATE asks SELECT of every table first, on
			// its own.
			var sel []Need
			for _, src := range scope {
				if !src.derived {
					sel = append(sel, Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Some: PrivSelect, Step: 1})
				}
			}
			for _, n := range sel {
				x.add(n)
			}
		}
		x.withScope(scope, func() {
			x.onConds(s.TableRefs.TableRefs)
			// MariaDB resolves WHERE and ORDER BY before the assignments.
			x.expr(s.Where, PrivSelect)
			if s.Order != nil {
				for _, it := range s.Order.Items {
					x.expr(it.Expr, PrivSelect)
				}
			}
			multi := s.MultipleTable || s.TableRefs.TableRefs.Right != nil
			for _, a := range s.List {
				if multi {
					// A multi-table UPDATE reads its targets too, and
					// resolves every column before it asks UPDATE.
					x.column(a.Column, PrivSelect)
				}
				x.assigned(a.Column, scope, multi)
				x.expr(a.Expr, PrivSelect)
			}
		})
		for _, src := range scope {
			if src.derived {
				continue
			}
			if !x.hasTableNeed(src, PrivUpdate) {
				x.add(Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Some: PrivSelect})
			}
		}
	})
}

// assigned adds UPDATE on column c of an UPDATE's table, and UPDATE on
// that table or one of its columns.
func (x *extractor) assigned(c *ast.ColumnName, scope []source, late bool) {
	for _, src := range scope {
		if src.derived {
			continue
		}
		if c.Table.L != "" && src.ref != c.Table.L {
			continue
		}
		// A bare name in a multi-table UPDATE: sluice does not know
		// which table holds it and asks it of each.
		x.add(Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Some: PrivUpdate, Late: late})
		x.colNeed(src, c, PrivUpdate)
	}
}

// hasTableNeed reports whether a table Need asking some of p on src was
// added.
func (x *extractor) hasTableNeed(src source, p Priv) bool {
	for _, n := range slices.Concat(x.needs, x.cols) {
		if n.Level == NeedTable && n.Some&p != 0 && n.DB == src.db && n.Table == src.table {
			return true
		}
	}
	return false
}

// delete adds DELETE's Needs: DELETE on the tables rows are deleted from,
// SELECT on the others and on the columns read.
func (x *extractor) delete(s *ast.DeleteStmt) {
	x.withCTEs(s.With, func() {
		var targets []*ast.TableName
		if s.IsMultiTable && s.Tables != nil {
			targets = s.Tables.Tables
		} else if t := target(s.TableRefs); t != nil {
			targets = []*ast.TableName{t}
		}
		if s.IsMultiTable {
			for _, t := range targets {
				if t.Schema.L == "" {
					x.add(Need{Level: NeedCurrentDB})
					break
				}
			}
		}
		scope := x.sources(s.TableRefs.TableRefs, 0, nil)
		if s.IsMultiTable {
			// Like a multi-table UPDATE, SELECT of every table first.
			for _, src := range scope {
				if !src.derived {
					x.add(Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Some: PrivSelect, Step: 1})
				}
			}
		}
		deleted := make([]bool, len(scope))
		for _, t := range targets {
			for i, src := range scope {
				if !src.derived && src.ref == t.Name.L && (t.Schema.L == "" || src.db == "" || strings.EqualFold(t.Schema.O, src.db)) {
					deleted[i] = true
					// MariaDB names a target given by its alias in the
					// current database.
					x.add(Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Priv: PrivDelete,
						AliasDB: s.IsMultiTable && t.Schema.L == ""})
				}
			}
		}
		for i, src := range scope {
			if !src.derived && !deleted[i] && !s.IsMultiTable {
				x.add(Need{Level: NeedTable, DB: strings.Clone(src.db), Table: strings.Clone(src.table), Some: PrivSelect})
			}
		}
		x.withScope(scope, func() {
			x.onConds(s.TableRefs.TableRefs)
			x.expr(s.Where, PrivSelect)
			if s.Order != nil {
				for _, it := range s.Order.Items {
					x.expr(it.Expr, PrivSelect)
				}
			}
		})
	})
}

// adminVars are the privileges SET GLOBAL of a variable needs (at least
// one of them), as MariaDB 10.11 lists them in its error; SUPER for the
// rest. READ_ONLY ADMIN is the one that SUPER no longer gives.
var adminVars = map[string]Priv{
	"max_connections":                         PrivSuper | PrivConnectionAdmin,
	"max_user_connections":                    PrivSuper | PrivConnectionAdmin,
	"max_connect_errors":                      PrivSuper | PrivConnectionAdmin,
	"connect_timeout":                         PrivSuper | PrivConnectionAdmin,
	"wait_timeout":                            PrivSuper | PrivConnectionAdmin,
	"interactive_timeout":                     PrivSuper | PrivConnectionAdmin,
	"init_connect":                            PrivSuper | PrivConnectionAdmin,
	"max_password_errors":                     PrivSuper | PrivConnectionAdmin,
	"disconnect_on_expired_password":          PrivSuper | PrivConnectionAdmin,
	"extra_max_connections":                   PrivSuper | PrivConnectionAdmin,
	"proxy_protocol_networks":                 PrivSuper | PrivConnectionAdmin,
	"secure_auth":                             PrivSuper | PrivConnectionAdmin,
	"thread_pool_size":                        PrivSuper | PrivConnectionAdmin,
	"read_only":                               PrivReadOnlyAdmin,
	"binlog_cache_size":                       PrivSuper | PrivBinlogAdmin,
	"binlog_stmt_cache_size":                  PrivSuper | PrivBinlogAdmin,
	"binlog_format":                           PrivSuper | PrivBinlogAdmin,
	"binlog_row_image":                        PrivSuper | PrivBinlogAdmin,
	"binlog_checksum":                         PrivSuper | PrivBinlogAdmin,
	"binlog_annotate_row_events":              PrivSuper | PrivBinlogAdmin,
	"binlog_commit_wait_count":                PrivSuper | PrivBinlogAdmin,
	"binlog_commit_wait_usec":                 PrivSuper | PrivBinlogAdmin,
	"binlog_direct_non_transactional_updates": PrivSuper | PrivBinlogAdmin,
	"binlog_expire_logs_seconds":              PrivSuper | PrivBinlogAdmin,
	"binlog_file_cache_size":                  PrivSuper | PrivBinlogAdmin,
	"binlog_row_metadata":                     PrivSuper | PrivBinlogAdmin,
	"expire_logs_days":                        PrivSuper | PrivBinlogAdmin,
	"log_bin_compress":                        PrivSuper | PrivBinlogAdmin,
	"log_bin_compress_min_len":                PrivSuper | PrivBinlogAdmin,
	"log_bin_trust_function_creators":         PrivSuper | PrivBinlogAdmin,
	"max_binlog_cache_size":                   PrivSuper | PrivBinlogAdmin,
	"max_binlog_size":                         PrivSuper | PrivBinlogAdmin,
	"max_binlog_stmt_cache_size":              PrivSuper | PrivBinlogAdmin,
	"sync_binlog":                             PrivSuper | PrivBinlogAdmin,
}

// sessionAdminVars are session variables whose SET needs a privilege (at
// least one of those given): the ones that change what the binary log
// records or how replication sees the session.
var sessionAdminVars = map[string]Priv{
	"sql_log_bin":                             PrivSuper | PrivBinlogAdmin,
	"binlog_format":                           PrivSuper | PrivBinlogAdmin,
	"binlog_row_image":                        PrivSuper | PrivBinlogAdmin,
	"binlog_row_metadata":                     PrivSuper | PrivBinlogAdmin,
	"binlog_annotate_row_events":              PrivSuper | PrivBinlogAdmin,
	"binlog_direct_non_transactional_updates": PrivSuper | PrivBinlogAdmin,
	"binlog_alter_two_phase":                  PrivSuper | PrivBinlogAdmin,
	"skip_replication":                        PrivSuper | PrivBinlogAdmin,
	"sql_log_off":                             PrivSuper,
	"gtid_domain_id":                          PrivSuper | PrivReplSlaveAdmin,
	"gtid_seq_no":                             PrivSuper | PrivReplSlaveAdmin,
	"server_id":                               PrivSuper | PrivReplSlaveAdmin,
	"pseudo_slave_mode":                       PrivSuper | PrivReplSlaveAdmin,
	"pseudo_thread_id":                        PrivSuper,
	"rand_seed1":                              PrivSuper,
	"rand_seed2":                              PrivSuper,
	"wsrep_on":                                PrivSuper,
	"transaction_read_only":                   0,
}

// set adds SET's Needs: SET GLOBAL needs SUPER (or the variable's own
// administrative privilege); a few session variables need one too; the
// expressions' reads.
func (x *extractor) set(s *ast.SetStmt) bool {
	for _, v := range s.Variables {
		name := strings.ToLower(v.Name)
		switch {
		case v.IsSystem && (v.IsGlobal || v.IsInstance):
			p, ok := adminVars[name]
			if !ok {
				p = PrivSuper
			}
			x.global(p)
		case v.IsSystem:
			if p, ok := sessionAdminVars[name]; ok && p != 0 {
				x.global(p)
			}
		}
		x.withScope(nil, func() { x.expr(v.Value, PrivSelect) })
	}
	return true
}

// show adds SHOW's Needs; false: a SHOW sluice does not model.
func (x *extractor) show(s *ast.ShowStmt) bool {
	switch s.Tp {
	case ast.ShowDatabases, ast.ShowVariables, ast.ShowStatus, ast.ShowWarnings, ast.ShowErrors,
		ast.ShowCharset, ast.ShowCollation, ast.ShowEngines, ast.ShowPlugins, ast.ShowPrivileges,
		ast.ShowProcessList, ast.ShowProfiles, ast.ShowProfile:
		// The process list is sluice's own (see sessioncmds.go).
	case ast.ShowGrants:
		if s.User != nil && !s.User.CurrentUser || len(s.Roles) > 0 {
			// Another account's grants: readable with SELECT on mysql
			// (the session's own, named, is answered as SHOW GRANTS).
			x.db("mysql", PrivSelect)
			if s.User != nil && len(s.Roles) == 0 {
				x.showUser, x.showHost = strings.Clone(s.User.Username), strings.Clone(s.User.Hostname)
			}
		}
	case ast.ShowTables, ast.ShowTableStatus, ast.ShowOpenTables, ast.ShowTriggers, ast.ShowEvents:
		x.add(Need{Level: NeedDB, DB: strings.Clone(s.DBName), Loose: true})
	case ast.ShowCreateDatabase:
		x.db(s.DBName, 0)
	case ast.ShowCreateTable, ast.ShowCreateSequence, ast.ShowColumns, ast.ShowIndex, ast.ShowCreateView:
		if s.Table == nil {
			return false
		}
		t := *s.Table
		if t.Schema.L == "" && s.DBName != "" {
			t.Schema = ast.NewCIStr(s.DBName)
		}
		x.showTable(s.Tp, &t)
	case ast.ShowMasterStatus, ast.ShowBinlogStatus:
		x.global(PrivSuper | PrivBinlogMonitor)
	default:
		return false
	}
	return true
}

// showTable adds what SHOW CREATE TABLE / VIEW / SEQUENCE, SHOW COLUMNS
// and SHOW INDEX need of table t.
func (x *extractor) showTable(tp ast.ShowStmtType, t *ast.TableName) {
	switch tp {
	case ast.ShowCreateView:
		// SELECT is asked first and named alone; a view's own query is
		// not run.
		x.add(Need{Level: NeedTable, DB: strings.Clone(t.Schema.O), Table: strings.Clone(t.Name.O), Priv: PrivSelect, Cmd: "SELECT"})
		x.add(Need{Level: NeedTable, DB: strings.Clone(t.Schema.O), Table: strings.Clone(t.Name.O), Priv: PrivShowView, Cmd: "SHOW VIEW"})
	case ast.ShowColumns, ast.ShowIndex:
		x.anyOn(t, "SELECT")
	default:
		x.add(Need{Level: NeedTable, DB: strings.Clone(t.Schema.O), Table: strings.Clone(t.Name.O), Any: true, Cmd: "SHOW", View: true})
	}
}
