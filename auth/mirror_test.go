package auth

import (
	"slices"
	"strings"
	"testing"
)

// The SHOW CREATE TABLE texts below are MariaDB 10.11's own output for the
// tables named in their comments.

// CREATE TABLE customers (id int PRIMARY KEY AUTO_INCREMENT, name varchar(20)
// COMMENT ...) AUTO_INCREMENT=100 DEFAULT CHARSET=latin1 COMMENT='cust”s'
const showCustomers = "CREATE TABLE `customers` (\n" +
	"  `id` int(11) NOT NULL AUTO_INCREMENT,\n" +
	"  `name` varchar(20) DEFAULT NULL COMMENT 'it''s a \"name\"\\nx',\n" +
	"  PRIMARY KEY (`id`)\n" +
	") ENGINE=InnoDB AUTO_INCREMENT=100 DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci COMMENT='cust''s'"

// A partitioned table with a generated column, a JSON column and checks.
const showOrders = "CREATE TABLE `orders` (\n" +
	"  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n" +
	"  `cid` int(11) DEFAULT NULL,\n" +
	"  `amount` decimal(10,2) DEFAULT 0.00,\n" +
	"  `st` enum('a','b c') DEFAULT 'a',\n" +
	"  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),\n" +
	"  `g` int(11) GENERATED ALWAYS AS (`cid` + 1) VIRTUAL,\n" +
	"  `created` datetime NOT NULL DEFAULT current_timestamp(),\n" +
	"  PRIMARY KEY (`id`,`created`),\n" +
	"  KEY `k` (`cid`),\n" +
	"  CONSTRAINT `chk` CHECK (`amount` >= 0)\n" +
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci ROW_FORMAT=DYNAMIC\n" +
	" PARTITION BY RANGE  COLUMNS(`created`)\n" +
	"(PARTITION `p0` VALUES LESS THAN ('2020-01-01') ENGINE = InnoDB,\n" +
	" PARTITION `p1` VALUES LESS THAN (MAXVALUE) ENGINE = InnoDB)"

// Foreign keys, one with a name that holds a space, and system versioning.
const showItems = "CREATE TABLE `items` (\n" +
	"  `id` int(11) NOT NULL AUTO_INCREMENT,\n" +
	"  `cid` int(11) DEFAULT NULL,\n" +
	"  PRIMARY KEY (`id`),\n" +
	"  KEY `cid` (`cid`),\n" +
	"  CONSTRAINT `items_ibfk_1` FOREIGN KEY (`cid`) REFERENCES `customers` (`id`),\n" +
	"  CONSTRAINT `x y` FOREIGN KEY (`id`) REFERENCES `customers` (`id`) ON DELETE CASCADE\n" +
	") ENGINE=InnoDB AUTO_INCREMENT=7 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci WITH SYSTEM VERSIONING"

func TestCleanCreateTable(t *testing.T) {
	cases := []struct {
		name, text, schema, table string
		full, bare                string
	}{{
		name: "auto_increment and options", text: showCustomers, schema: "shop", table: "customers",
		full: "CREATE TABLE `shop`.`customers` (\n" +
			"  `id` int(11) NOT NULL AUTO_INCREMENT,\n" +
			"  `name` varchar(20) DEFAULT NULL COMMENT 'it''s a \"name\"\\nx',\n" +
			"  PRIMARY KEY (`id`)\n" +
			") DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci",
		bare: "CREATE TABLE `shop`.`customers` (\n" +
			"  `id` int(11),\n" +
			"  `name` varchar(20)\n" +
			") DEFAULT CHARSET=latin1 COLLATE=latin1_swedish_ci",
	}, {
		name: "partitions", text: showOrders, schema: "shop", table: "orders",
		full: "CREATE TABLE `shop`.`orders` (\n" +
			"  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n" +
			"  `cid` int(11) DEFAULT NULL,\n" +
			"  `amount` decimal(10,2) DEFAULT 0.00,\n" +
			"  `st` enum('a','b c') DEFAULT 'a',\n" +
			"  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),\n" +
			"  `g` int(11) GENERATED ALWAYS AS (`cid` + 1) VIRTUAL,\n" +
			"  `created` datetime NOT NULL DEFAULT current_timestamp(),\n" +
			"  PRIMARY KEY (`id`,`created`),\n" +
			"  KEY `k` (`cid`),\n" +
			"  CONSTRAINT `chk` CHECK (`amount` >= 0)\n" +
			") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
		bare: "CREATE TABLE `shop`.`orders` (\n" +
			"  `id` bigint(20) unsigned,\n" +
			"  `cid` int(11),\n" +
			"  `amount` decimal(10,2),\n" +
			"  `st` enum('a','b c'),\n" +
			"  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,\n" +
			"  `g` int(11),\n" +
			"  `created` datetime\n" +
			") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
	}, {
		name: "foreign keys, renamed", text: showItems, schema: "o`dd", table: "items_all",
		full: "CREATE TABLE `o``dd`.`items_all` (\n" +
			"  `id` int(11) NOT NULL AUTO_INCREMENT,\n" +
			"  `cid` int(11) DEFAULT NULL,\n" +
			"  PRIMARY KEY (`id`),\n" +
			"  KEY `cid` (`cid`)\n" +
			") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
		bare: "CREATE TABLE `o``dd`.`items_all` (\n" +
			"  `id` int(11),\n" +
			"  `cid` int(11)\n" +
			") DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci",
	}, {
		name: "no options, MySQL's data directory", schema: "s", table: "t",
		text: "CREATE TABLE `t` (\n  `a` int NOT NULL,\n  `b``c` int\n) ENGINE=MyISAM DATA DIRECTORY='/data/x/' INDEX DIRECTORY='/idx/'\n/*!50100 PARTITION BY HASH (`a`)\nPARTITIONS 4 */",
		full: "CREATE TABLE `s`.`t` (\n  `a` int NOT NULL,\n  `b``c` int\n)",
		bare: "CREATE TABLE `s`.`t` (\n  `a` int,\n  `b``c` int\n)",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := cleanCreateTable(c.text, c.schema, c.table)
			if err != nil {
				t.Fatal(err)
			}
			if got.Full != c.full {
				t.Errorf("full:\n%s\nwant:\n%s", got.Full, c.full)
			}
			if got.Bare != c.bare {
				t.Errorf("bare:\n%s\nwant:\n%s", got.Bare, c.bare)
			}
			for _, s := range []string{got.Full, got.Bare} {
				for _, bad := range []string{"AUTO_INCREMENT=", "FOREIGN KEY", "PARTITION", "ENGINE", "DIRECTORY", "SYSTEM VERSIONING", "REFERENCES"} {
					if strings.Contains(s, bad) {
						t.Errorf("%q left in:\n%s", bad, s)
					}
				}
			}
		})
	}
}

func TestCleanCreateTableRefuses(t *testing.T) {
	for _, text := range []string{
		"",
		"CREATE ALGORITHM=UNDEFINED DEFINER=`root`@`localhost` SQL SECURITY DEFINER VIEW `v1` AS select 1 AS `1`",
		"CREATE TABLE `t` (`a` int)",
		"CREATE TABLE `t` (\n  PRIMARY KEY (`a`)\n)",
	} {
		if got, err := cleanCreateTable(text, "s", "t"); err == nil {
			t.Errorf("%q: cleaned to %+v, want an error", text, got)
		}
	}
}

func TestIsForeignKey(t *testing.T) {
	for def, want := range map[string]bool{
		"CONSTRAINT `fk` FOREIGN KEY (`a`) REFERENCES `t` (`id`)":                 true,
		"CONSTRAINT `a``b c` FOREIGN KEY (`a`) REFERENCES `t` (`id`)":             true,
		"FOREIGN KEY (`a`) REFERENCES `t` (`id`)":                                 true,
		"CONSTRAINT fk FOREIGN KEY (`a`) REFERENCES `t` (`id`)":                   true,
		"CONSTRAINT `chk` CHECK (`a` > 0)":                                        false,
		"`foreign key` int(11) DEFAULT NULL":                                      false,
		"KEY `FOREIGN KEY` (`a`)":                                                 false,
		"CONSTRAINT `FOREIGN KEY` CHECK (`a` > 0)":                                false,
		"UNIQUE KEY `u` (`a`)":                                                    false,
		"CONSTRAINT `c` FOREIGN KEY(`a`) REFERENCES `t`(`id`) ON DELETE SET NULL": true,
	} {
		if got := isForeignKey(def); got != want {
			t.Errorf("isForeignKey(%q) = %v, want %v", def, got, want)
		}
	}
}

// The mirror copies no DEFINER and no body: views and routines are stubs
// that run with the caller's privileges.
func TestStubs(t *testing.T) {
	v := stubView("shop", "v`1", []string{"id", "na`me"})
	if want := "CREATE OR REPLACE SQL SECURITY INVOKER VIEW `shop`.`v``1` AS SELECT NULL AS `id`, NULL AS `na``me`"; v != want {
		t.Errorf("stubView = %q, want %q", v, want)
	}
	for _, fn := range []bool{false, true} {
		s := stubRoutine("shop", "p", fn)
		for _, need := range []string{"IF NOT EXISTS `shop`.`p`()", "SQL SECURITY INVOKER", "NO SQL", mirrorComment} {
			if !strings.Contains(s, need) {
				t.Errorf("stubRoutine(function=%v) = %q lacks %q", fn, s, need)
			}
		}
		if strings.Contains(s, "DEFINER") {
			t.Errorf("stubRoutine(function=%v) = %q names a definer", fn, s)
		}
	}
	full, plain := createSchema(&mirrorSchema{name: "a'b", charset: "latin1", collation: "latin1_bin"})
	if want := "CREATE DATABASE IF NOT EXISTS `a'b` CHARACTER SET latin1 COLLATE latin1_bin COMMENT 'created by sluice (auth.mirror_schema)'"; full != want {
		t.Errorf("createSchema = %q, want %q", full, want)
	}
	if plain != "CREATE DATABASE IF NOT EXISTS `a'b`" {
		t.Errorf("createSchema plain = %q", plain)
	}
}

func TestNormalType(t *testing.T) {
	for in, want := range map[string]string{
		"int(11)":             "int",
		"INT":                 "int",
		"bigint(20) unsigned": "bigint unsigned",
		"tinyint(1)":          "tinyint",
		"varchar(10)":         "varchar(10)",
		"decimal(10,2)":       "decimal(10,2)",
		"enum('int(3)')":      "enum('int(3)')",
	} {
		if got := normalType(in); got != want {
			t.Errorf("normalType(%q) = %q, want %q", in, got, want)
		}
	}
}

// catalogOf builds a catalog for tests: objects are "schema.name" to kind
// and columns.
func catalogOf(src int, objs map[string]*mirrorObject, routines ...string) *mirrorCatalog {
	c := newCatalog()
	for k, o := range objs {
		db, name, _ := strings.Cut(k, ".")
		o.src, o.srcTable = src, name
		c.schema(db).objects[name] = o
	}
	for _, r := range routines {
		typ, rest, _ := strings.Cut(r, " ")
		db, name, _ := strings.Cut(rest, ".")
		c.schema(db).routines[typ+" "+strings.ToLower(name)] = name
	}
	return c
}

func TestMergeCatalogs(t *testing.T) {
	def := catalogOf(0, map[string]*mirrorObject{
		"shop.users":    {kind: kindTable, cols: []string{"id int"}},
		"shop.v":        {kind: kindView, cols: []string{"id"}},
		"pay.orders_0":  {kind: kindTable, cols: []string{"uid int", "amount int"}},
		"pay.orders_1":  {kind: kindTable, cols: []string{"uid int", "amount int"}},
		"pay.broadcast": {kind: kindTable, cols: []string{"a int"}},
	}, "PROCEDURE shop.Refresh")
	other := catalogOf(1, map[string]*mirrorObject{
		"shop.users":   {kind: kindTable, cols: []string{"id int", "extra int"}},
		"pay.orders_2": {kind: kindTable, cols: []string{"uid int", "amount int", "late int"}},
		"pay.orders_3": {kind: kindTable, cols: []string{"uid int", "amount int"}},
		"logs.events":  {kind: kindTable, cols: []string{"at datetime"}},
	}, "PROCEDURE shop.refresh", "FUNCTION shop.refresh")
	logical := func(src int, schema, table string) string {
		if schema == "pay" && strings.HasPrefix(table, "orders_") {
			return "orders"
		}
		return ""
	}
	got := mergeCatalogs([]*mirrorCatalog{def, other}, logical)
	if n := sortedKeys(got.schemas); !slices.Equal(n, []string{"logs", "pay", "shop"}) {
		t.Fatalf("schemas %v", n)
	}
	if u := got.schemas["shop"].objects["users"]; u.src != 0 || len(u.cols) != 1 {
		t.Errorf("shop.users comes from cluster %d with %v: the default cluster's must win", u.src, u.cols)
	}
	pay := got.schemas["pay"].objects
	if n := sortedKeys(pay); !slices.Equal(n, []string{"broadcast", "orders", "orders_0", "orders_1", "orders_2", "orders_3"}) {
		t.Errorf("pay holds %v", n)
	}
	if o := pay["orders"]; o.src != 0 || o.srcTable != "orders_0" {
		t.Errorf("logical pay.orders from cluster %d table %s, want the first physical table (0, orders_0)", o.src, o.srcTable)
	}
	if r := sortedKeys(got.schemas["shop"].routines); !slices.Equal(r, []string{"FUNCTION refresh", "PROCEDURE refresh"}) {
		t.Errorf("routines %v", r)
	}
	if n := got.schemas["shop"].routines["PROCEDURE refresh"]; n != "Refresh" {
		t.Errorf("procedure named %q, want the default cluster's spelling Refresh", n)
	}
}
