package binlog

import (
	"fmt"
	"strings"

	"github.com/go-mysql-org/go-mysql/client"

	"github.com/sluice-proxy/sluice/router"
)

// triggers are the master's triggers by the table they fire on: what each
// table's triggers write. A binary log in statement format holds the
// statement that fired a trigger, not the trigger's own writes (a replica
// fires it again), so the tailer adds them. It is read from the master's
// information_schema when a connection starts and after each statement
// that may create or drop one; it belongs to one conn.
type triggers struct {
	// writes are the tables a table's triggers write.
	writes map[router.TableRef][]router.TableRef
	// unknown are the tables with a trigger whose body the tailer cannot
	// read (compound statements with control flow, stored routine calls):
	// a write to one of them resets the cache.
	unknown map[router.TableRef]bool
	// visible: the account holds TRIGGER on *.*, without which
	// information_schema.TRIGGERS hides the triggers of the tables it lacks
	// it on. Blind, the tailer resets the cache at every statement-format
	// write.
	visible bool
}

// triggerPrivQuery tells whether the account holds TRIGGER globally.
const triggerPrivQuery = "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'TRIGGER'" +
	" AND GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"

// triggersQuery lists the triggers the account can see (those on tables
// it has the TRIGGER privilege on; see docs/operations.md).
const triggersQuery = "SELECT TRIGGER_SCHEMA, EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT" +
	" FROM information_schema.TRIGGERS"

// load reads the master's triggers over ctl.
func (tr *triggers) load(ctl *client.Conn) error {
	r, err := ctl.Execute(triggerPrivQuery)
	if err != nil {
		return fmt.Errorf("read the account's privileges: %w", err)
	}
	n, err := r.GetInt(0, 0)
	if err != nil {
		return fmt.Errorf("read the account's privileges: %w", err)
	}
	tr.visible = n > 0
	r, err = ctl.Execute(triggersQuery)
	if err != nil {
		return fmt.Errorf("read triggers: %w", err)
	}
	writes := map[router.TableRef][]router.TableRef{}
	unknown := map[router.TableRef]bool{}
	for i := range r.RowNumber() {
		var col [4]string
		for j := range col {
			if col[j], err = r.GetString(i, j); err != nil {
				return fmt.Errorf("read triggers: %w", err)
			}
		}
		on := router.TableRef{Schema: col[1], Table: col[2]}
		w, ok := bodyWrites(col[3], col[0])
		if !ok {
			unknown[on] = true
			continue
		}
		writes[on] = append(writes[on], w...)
	}
	tr.writes, tr.unknown = writes, unknown
	return nil
}

// fired returns what the triggers on t write, or all when one of them
// cannot be read or the account cannot see them.
func (tr *triggers) fired(t router.TableRef) (all bool, writes []router.TableRef) {
	if !tr.visible || tr.unknown[t] {
		return true, nil
	}
	return false, tr.writes[t]
}

// bodyWrites reads the tables a trigger body writes, its unqualified names
// in the trigger's schema: one statement, or BEGIN … END around statements
// without control flow. ok is false for anything else.
func bodyWrites(body, schema string) (writes []router.TableRef, ok bool) {
	body = strings.TrimSpace(body)
	stmts := []string{body}
	if len(body) > 9 && strings.EqualFold(body[:5], "BEGIN") && strings.EqualFold(body[len(body)-3:], "END") {
		// Splitting at ';' is wrong for a ';' inside a string or comment;
		// then a piece fails to parse and the trigger counts as unknown.
		stmts = strings.Split(body[5:len(body)-3], ";")
	}
	for _, s := range stmts {
		if strings.TrimSpace(s) == "" {
			continue
		}
		w, err := router.WrittenTables(s, schema, 0)
		if err != nil || w.All || w.Routines {
			return nil, false
		}
		writes = append(writes, w.Tables...)
	}
	return writes, true
}
