package router

import "testing"

func TestPlanDDL(t *testing.T) {
	r := New(64)
	for q, want := range map[string]bool{
		"CREATE TABLE t (a int)":                                        true,
		"/* sluice:master */ create table t (a int)":                    true,
		"CREATE OR REPLACE ALGORITHM=MERGE VIEW v AS SELECT 1":          true,
		"CREATE DEFINER=`root`@`%` PROCEDURE p() BEGIN SELECT 1; END":   true,
		"CREATE FUNCTION f() RETURNS INT RETURN 1":                      true,
		"CREATE AGGREGATE FUNCTION f() RETURNS INT BEGIN RETURN 1; END": true,
		"ALTER TABLE t ADD COLUMN c int":                                true,
		"DROP TABLE IF EXISTS t":                                        true,
		"DROP VIEW v":                                                   true,
		"RENAME TABLE a TO b":                                           true,
		"CREATE DATABASE d":                                             true,
		"DROP SCHEMA d":                                                 true,
		"CREATE INDEX i ON t (a)":                                       true,
		"CREATE SEQUENCE s":                                             true,
		"INSERT INTO t VALUES (1); DROP TABLE t":                        true,
		"CREATE TEMPORARY TABLE x (a int)":                              false,
		"CREATE OR REPLACE TEMPORARY TABLE x (a int)":                   false,
		"DROP TEMPORARY TABLE x":                                        false,
		"CREATE USER u":                                                 false,
		"ALTER USER u IDENTIFIED BY 'x'":                                false,
		"DROP ROLE r":                                                   false,
		"SELECT 'create table t (a int)'":                               false,
		"INSERT INTO created (drop) VALUES (1)":                         false,
		"UPDATE t SET a = 1":                                            false,
		"SELECT 1":                                                      false,
	} {
		if got := r.ClassifyBytes([]byte(q)).DDL; got != want {
			t.Errorf("%q: DDL = %v, want %v", q, got, want)
		}
	}
}
