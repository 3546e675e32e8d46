package grants

import (
	"testing"

	"github.com/sluice-proxy/sluice/router"
)

// TestNoBypass: statements a hostile review ran through sluice to reach
// what account rvu may not (MariaDB refuses each; sluice let them all
// through before). rvu may do anything in rvown, read two columns of
// rv.pub_t, and nothing else; its session's database is rv.
func TestNoBypass(t *testing.T) {
	s, err := Parse("rvu", "%", []string{
		"GRANT USAGE ON *.* TO `rvu`@`%`",
		"GRANT ALL PRIVILEGES ON `rvown`.* TO `rvu`@`%`",
		"GRANT SELECT (`id`, `pub`) ON `rv`.`pub_t` TO `rvu`@`%`",
	})
	if err != nil {
		t.Fatal(err)
	}
	a := s.Activate("")
	r := router.New(100)
	who := Who{ClientHost: "127.0.0.1", Password: true}
	denied := []string{
		"USE rvown; DELETE x FROM rvown.sink AS x WHERE 0; DROP TABLE rv.pub_t",
		"USE rv; SELECT * FROM secret_t",
		"SELECT rv.pub_t.secret FROM pub_t",
		"SELECT rv.pub_t.* FROM pub_t",
		"SELECT 1 FROM rvown.sink WHERE EXISTS (SELECT 1 FROM pub_t WHERE rv.pub_t.secret = 'x')",
		"DELETE rv.secret_t FROM secret_t WHERE id = 2",
		"INSERT INTO rvown.sink (id, v) SELECT id, pub FROM rv.pub_t ON DUPLICATE KEY UPDATE v = pub_t.secret",
		"LOAD DATA LOCAL INFILE '/x' INTO TABLE rvown.sink (id) SET v = (SELECT s FROM rv.secret_t LIMIT 1)",
		"SELECT 1 UNION SELECT 2 ORDER BY (SELECT s FROM rv.secret_t LIMIT 1)",
		"SELECT pub FROM rv.pub_t WHERE MATCH(secret) AGAINST('alpha')",
		"SELECT pub, ROW_NUMBER() OVER w FROM rv.pub_t WINDOW w AS (ORDER BY secret)",
		"SELECT pub AS secret FROM rv.pub_t ORDER BY secret + 0",
		"SELECT pub AS secret FROM rv.pub_t ORDER BY secret LIKE 'b%'",
		"SELECT DEFAULT(secret) FROM rv.pub_t",
		"SELECT NEXTVAL(rv.seq)",
		"SELECT NEXT VALUE FOR rv.seq",
		"SELECT LASTVAL(rv.seq)",
		"ALTER TABLE rvown.ptab EXCHANGE PARTITION p0 WITH TABLE rv.secret_t",
		"CREATE TABLE rvown.child (id INT, FOREIGN KEY (id) REFERENCES rv.secret_t (id))",
		"CREATE TABLE rvown.child2 (id INT REFERENCES rv.secret_t (id))",
		"ALTER TABLE rvown.sink ADD CONSTRAINT fk FOREIGN KEY (id) REFERENCES rv.secret_t (id)",
		"CREATE TABLE rvown.m (id INT) ENGINE=MRG_MyISAM UNION=(rv.my_t)",
		"SET SESSION binlog_format = 'STATEMENT'",
		"PREPARE s FROM 'DROP TABLE rv.secret_t'",
	}
	// A PREPARE of harmless text first: the next, differing only in its
	// literal, must not share its plan.
	if e := a.Check(r.Classify("PREPARE s FROM 'SELECT 1'").Access, "rv", who, nil); e != nil {
		t.Fatalf("PREPARE of SELECT 1: %v", e)
	}
	// The same with double quotes, which ANSI_QUOTES reads as a name
	// (sluice then cannot be sure of the text: only ALL may).
	r.Classify(`PREPARE s FROM "SELECT 1"`)
	denied = append(denied, `PREPARE s FROM "DROP TABLE rv.secret_t"`)
	for _, q := range []string{`GRANT SELECT ON rvown.* TO "x"@"%"`, "GRANT SELECT ON rvown.* TO x", "CREATE USER x", `SET PASSWORD FOR "x" = PASSWORD("y")`} {
		if acc := r.Classify(q).Access; !acc.Account && !acc.Unknown {
			t.Errorf("%s: not refused as an account statement", q)
		}
	}
	for _, q := range denied {
		if e := a.Check(r.Classify(q).Access, "rv", who, nil); e == nil {
			t.Errorf("%s: allowed", q)
		}
	}
	for _, q := range []string{
		"SELECT pub FROM pub_t",
		"SELECT rv.pub_t.pub FROM pub_t",
		"SELECT pub AS secret FROM rv.pub_t ORDER BY secret",
		"INSERT INTO rvown.sink (id, v) SELECT id, pub FROM rv.pub_t ON DUPLICATE KEY UPDATE v = pub_t.pub",
		"ALTER TABLE rvown.ptab TRUNCATE PARTITION p0",
	} {
		if e := a.Check(r.Classify(q).Access, "rv", who, nil); e != nil {
			t.Errorf("%s: %v", q, e)
		}
	}
}
