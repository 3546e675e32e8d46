package shard

import (
	"testing"

	"github.com/sluice-proxy/sluice/conf"
)

// testConfig is the payment seed's layout: 8 clusters x 10 tables by uid,
// items sharded alike, config broadcast, and a hash rule with virtual
// shards and an id column.
func testConfig() *conf.Config {
	cfg := &conf.Config{Sharding: conf.Sharding{MaxMergeRows: 1000, NodeID: 3}}
	var names []string
	for _, n := range []string{"main", "db1", "db2", "db3", "db4", "db5", "db6", "db7", "db8"} {
		cfg.Clusters = append(cfg.Clusters, conf.Cluster{Name: n})
		if n != "main" {
			names = append(names, n)
		}
	}
	cfg.Shards = []conf.Shard{
		{Schema: "pay", Table: "orders", Key: "uid", Algorithm: "mod", Clusters: names, TablesPerCluster: 10, IDColumn: "id"},
		{Schema: "pay", Table: "items", Key: "uid", Algorithm: "mod", Clusters: names, TablesPerCluster: 10},
		{Schema: "pay", Table: "users", Key: "name", Algorithm: "hash", Clusters: names[:2], TablesPerCluster: 2, VirtualShards: 64, IDColumn: "id"},
		{Schema: "pay", Table: "events", Key: "day", Algorithm: "date", DateUnit: "month", Clusters: names[:3], TablesPerCluster: 4},
		{Schema: "pay", Table: "ranges", Key: "k", Algorithm: "range", Clusters: names[:2], TablesPerCluster: 1, Boundaries: []int64{0, 100, 200}},
		{Schema: "pay", Table: "solo", Key: "uid", Algorithm: "mod", Clusters: names[:2], TablesPerCluster: 1},
	}
	cfg.Broadcast = []conf.Broadcast{{Schema: "pay", Table: "config"}}
	return cfg
}

func testRules(t testing.TB) *Rules {
	t.Helper()
	r, err := New(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	setKeyColumns(t, r)
	return r
}

// setKeyColumns gives testConfig's rules the key column types the masters
// would report.
func setKeyColumns(t testing.TB, r *Rules) {
	t.Helper()
	bigint := KeyColumn{DataType: "bigint", ColumnType: "bigint(20)"}
	for logical, kc := range map[string]KeyColumn{
		"pay.orders": bigint, "pay.items": bigint, "pay.solo": bigint,
		"pay.users":  {DataType: "varchar", ColumnType: "varchar(64)", Collation: "utf8mb4_bin", MaxChars: 64},
		"pay.events": {DataType: "date", ColumnType: "date"},
		"pay.ranges": {DataType: "int", ColumnType: "int(11)"},
	} {
		if err := r.SetKeyColumn(logical, kc, nil); err != nil {
			t.Fatal(err)
		}
	}
}
