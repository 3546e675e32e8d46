package router

import "sort"

// builtinFuncs is the set of MariaDB 10.11 built-in function names, spelled as the TiDB
// parser (in MariaDB mode) reports them in ast.FuncCallExpr.FnName.L. It holds MariaDB's
// native functions (those in its function registry, such as ABS or JSON_VALUE), the
// functions its grammar parses as keywords (such as TRIM, SUBSTRING, CURRENT_USER, CAST or
// the window functions), and the labels the TiDB parser gives to some MariaDB built-in
// syntaxes: CHAR(65) is reported as "char_func" and DATE '2020-01-01' as
// "'tidb`.(dateliteral", for example. Aggregate and window calls are separate AST node
// types (ast.AggregateFuncExpr, ast.WindowFuncExpr), so only FuncCallExpr names matter;
// the aggregate and window names are in the set anyway, as they are MariaDB built-ins too.
//
// A name must not be added unless MariaDB itself treats it as built-in. In MariaDB an
// unqualified call of a name that is not a built-in resolves to a stored function (or a
// UDF) of that name, and such a function may write, so a statement calling it must go to
// the master. In particular, names of functions that only TiDB or MySQL has (TIDB_VERSION,
// BIN_TO_UUID, REGEXP_LIKE, ANY_VALUE, the MEMBER OF operator's "json_memberof", ...) are
// not in the set: MariaDB would look for a stored function of that name.
//
// Three caveats for callers. First, the geometry constructors POINT, LINESTRING, POLYGON,
// MULTIPOINT, MULTILINESTRING, MULTIPOLYGON and GEOMETRYCOLLECTION are built-in only with
// their documented arguments (POINT with two, the others with at least one); MariaDB
// resolves POINT() or LINESTRING() with no arguments to a stored function. Second, the
// keyword functions (NOW, TRIM, CURDATE, USER, SUBSTRING, ...) are built-in only when the
// name is not quoted: MariaDB resolves `now`() in backquotes to a stored function, and the
// parser does not record the quoting. Third, a stored function named char_func or
// insert_func would be reported under the same name as CHAR(...) or INSERT(...). A
// schema-qualified call (db.f()) has a non-empty FuncCallExpr.Schema and is never a
// built-in whatever its name.
//
// How the list was made, and how to check it. The candidates were the names in
// information_schema.SQL_FUNCTIONS, the upper-case words in the mariadbd binary (which
// include its native function registry), the function-name constants of the TiDB
// parser's ast package, and MariaDB's keywords. On a MariaDB 10.11 server, in a scratch
// database, a name N was kept when CREATE FUNCTION scratch.N() gave Note 1585 ("This
// function 'N' has the same name as a native function"), which MariaDB also gives for
// every keyword, and, with a stored function N of zero, one and two INT parameters in
// turn, an unqualified call N(...) did not reach the stored function for at least one of
// them; names with special syntax (CAST, CONVERT, EXTRACT, POSITION, DATE_ADD,
// TIMESTAMPADD, GET_FORMAT, NEXTVAL, VALUES, the window functions, ...) were checked with a
// realistic call instead. Keywords that are not functions (ALL, DISTINCT, BINARY, NOT,
// ROW, STRAIGHT_JOIN, SQL_CACHE, ...) were dropped. Then a realistic call of every
// built-in was parsed with the TiDB parser and the FnName.L of every FuncCallExpr it
// produced was added. TestBuiltinFuncCalls parses such calls; tests/builtins_test.go checks
// every name against a real MariaDB server.
var builtinFuncs = map[string]struct{}{
	// Labels the TiDB parser gives to MariaDB built-in syntaxes.
	"'tidb`.(dateliteral":      {}, // DATE '2020-01-01' and {d '2020-01-01'}
	"'tidb`.(timeliteral":      {}, // TIME '10:00:00' and {t '10:00:00'}
	"'tidb`.(timestampliteral": {}, // TIMESTAMP '2020-01-01 10:00:00' and {ts '...'}
	"char_func":                {}, // CHAR(65) and CHAR(65 USING utf8mb4)
	"insert_func":              {}, // INSERT('abc', 1, 1, 'x')

	// MariaDB's names.
	"abs": {}, "acos": {}, "add_months": {}, "adddate": {}, "addtime": {}, "aes_decrypt": {},
	"aes_encrypt": {}, "area": {}, "asbinary": {}, "ascii": {}, "asin": {}, "astext": {}, "aswkb": {},
	"aswkt": {}, "atan": {}, "atan2": {}, "avg": {},

	"benchmark": {}, "bin": {}, "binlog_gtid_pos": {}, "bit_and": {}, "bit_count": {},
	"bit_length": {}, "bit_or": {}, "bit_xor": {}, "boundary": {}, "buffer": {},

	"cast": {}, "ceil": {}, "ceiling": {}, "centroid": {}, "char": {}, "char_length": {},
	"character": {}, "character_length": {}, "charset": {}, "chr": {}, "coalesce": {},
	"coercibility": {}, "collation": {}, "column_add": {}, "column_check": {}, "column_create": {},
	"column_delete": {}, "column_exists": {}, "column_get": {}, "column_json": {}, "column_list": {},
	"compress": {}, "concat": {}, "concat_operator_oracle": {}, "concat_ws": {}, "connection_id": {},
	"contains": {}, "conv": {}, "convert": {}, "convert_tz": {}, "convexhull": {}, "cos": {},
	"cot": {}, "count": {}, "crc32": {}, "crc32c": {}, "crosses": {}, "cume_dist": {}, "curdate": {},
	"current_date": {}, "current_role": {}, "current_time": {}, "current_timestamp": {},
	"current_user": {}, "curtime": {},

	"database": {}, "date": {}, "date_add": {}, "date_format": {}, "date_sub": {}, "datediff": {},
	"day": {}, "dayname": {}, "dayofmonth": {}, "dayofweek": {}, "dayofyear": {}, "decode": {},
	"decode_histogram": {}, "decode_oracle": {}, "default": {}, "degrees": {}, "dense_rank": {},
	"des_decrypt": {}, "des_encrypt": {}, "dimension": {}, "disjoint": {},

	"elt": {}, "encode": {}, "encrypt": {}, "endpoint": {}, "envelope": {}, "equals": {}, "exp": {},
	"export_set": {}, "exteriorring": {}, "extract": {}, "extractvalue": {},

	"field": {}, "find_in_set": {}, "first_value": {}, "floor": {}, "format": {}, "found_rows": {},
	"from_base64": {}, "from_days": {}, "from_unixtime": {},

	"geomcollfromtext": {}, "geomcollfromwkb": {}, "geometrycollection": {},
	"geometrycollectionfromtext": {}, "geometrycollectionfromwkb": {}, "geometryfromtext": {},
	"geometryfromwkb": {}, "geometryn": {}, "geometrytype": {}, "geomfromtext": {}, "geomfromwkb": {},
	"get_format": {}, "get_lock": {}, "glength": {}, "greatest": {}, "group_concat": {},

	"hex": {}, "hour": {},

	"if": {}, "ifnull": {}, "inet6_aton": {}, "inet6_ntoa": {}, "inet_aton": {}, "inet_ntoa": {},
	"insert": {}, "instr": {}, "interiorringn": {}, "intersects": {}, "interval": {},
	"is_free_lock": {}, "is_ipv4": {}, "is_ipv4_compat": {}, "is_ipv4_mapped": {}, "is_ipv6": {},
	"is_used_lock": {}, "isclosed": {}, "isempty": {}, "isnull": {}, "isring": {}, "issimple": {},

	"json_array": {}, "json_array_append": {}, "json_array_insert": {}, "json_arrayagg": {},
	"json_compact": {}, "json_contains": {}, "json_contains_path": {}, "json_depth": {},
	"json_detailed": {}, "json_equals": {}, "json_exists": {}, "json_extract": {}, "json_insert": {},
	"json_keys": {}, "json_length": {}, "json_loose": {}, "json_merge": {}, "json_merge_patch": {},
	"json_merge_preserve": {}, "json_normalize": {}, "json_object": {}, "json_objectagg": {},
	"json_overlaps": {}, "json_pretty": {}, "json_query": {}, "json_quote": {}, "json_remove": {},
	"json_replace": {}, "json_search": {}, "json_set": {}, "json_type": {}, "json_unquote": {},
	"json_valid": {}, "json_value": {},

	"lag": {}, "last_day": {}, "last_insert_id": {}, "last_value": {}, "lastval": {}, "lcase": {},
	"lead": {}, "least": {}, "left": {}, "length": {}, "lengthb": {}, "linefromtext": {},
	"linefromwkb": {}, "linestring": {}, "linestringfromtext": {}, "linestringfromwkb": {}, "ln": {},
	"load_file": {}, "localtime": {}, "localtimestamp": {}, "locate": {}, "log": {}, "log10": {},
	"log2": {}, "lower": {}, "lpad": {}, "lpad_oracle": {}, "ltrim": {}, "ltrim_oracle": {},

	"make_set": {}, "makedate": {}, "maketime": {}, "master_gtid_wait": {}, "master_pos_wait": {},
	"max": {}, "mbrcontains": {}, "mbrdisjoint": {}, "mbrequal": {}, "mbrequals": {},
	"mbrintersects": {}, "mbroverlaps": {}, "mbrtouches": {}, "mbrwithin": {}, "md5": {},
	"median": {}, "microsecond": {}, "mid": {}, "min": {}, "minute": {}, "mlinefromtext": {},
	"mlinefromwkb": {}, "mod": {}, "month": {}, "monthname": {}, "mpointfromtext": {},
	"mpointfromwkb": {}, "mpolyfromtext": {}, "mpolyfromwkb": {}, "multilinestring": {},
	"multilinestringfromtext": {}, "multilinestringfromwkb": {}, "multipoint": {},
	"multipointfromtext": {}, "multipointfromwkb": {}, "multipolygon": {}, "multipolygonfromtext": {},
	"multipolygonfromwkb": {},

	"name_const": {}, "natural_sort_key": {}, "nextval": {}, "now": {}, "nth_value": {}, "ntile": {},
	"nullif": {}, "numgeometries": {}, "numinteriorrings": {}, "numpoints": {}, "nvl": {}, "nvl2": {},

	"oct": {}, "octet_length": {}, "old_password": {}, "ord": {}, "overlaps": {},

	"password": {}, "percent_rank": {}, "percentile_cont": {}, "percentile_disc": {},
	"period_add": {}, "period_diff": {}, "pi": {}, "point": {}, "pointfromtext": {},
	"pointfromwkb": {}, "pointn": {}, "pointonsurface": {}, "polyfromtext": {}, "polyfromwkb": {},
	"polygon": {}, "polygonfromtext": {}, "polygonfromwkb": {}, "position": {}, "pow": {},
	"power": {},

	"quarter": {}, "quote": {},

	"radians": {}, "rand": {}, "random_bytes": {}, "rank": {}, "regexp_instr": {},
	"regexp_replace": {}, "regexp_substr": {}, "release_all_locks": {}, "release_lock": {},
	"repeat": {}, "replace": {}, "replace_oracle": {}, "reverse": {}, "right": {}, "round": {},
	"row_count": {}, "row_number": {}, "rownum": {}, "rpad": {}, "rpad_oracle": {}, "rtrim": {},
	"rtrim_oracle": {},

	"schema": {}, "schemas": {}, "sec_to_time": {}, "second": {}, "session_user": {}, "setval": {},
	"sformat": {}, "sha": {}, "sha1": {}, "sha2": {}, "sign": {}, "sin": {}, "sleep": {},
	"soundex": {}, "space": {}, "sql_tsi_day": {}, "sql_tsi_hour": {}, "sql_tsi_minute": {},
	"sql_tsi_month": {}, "sql_tsi_second": {}, "sql_tsi_year": {}, "sqrt": {}, "srid": {},
	"st_area": {}, "st_asbinary": {}, "st_asgeojson": {}, "st_astext": {}, "st_aswkb": {},
	"st_aswkt": {}, "st_boundary": {}, "st_buffer": {}, "st_centroid": {}, "st_contains": {},
	"st_convexhull": {}, "st_crosses": {}, "st_difference": {}, "st_dimension": {}, "st_disjoint": {},
	"st_distance": {}, "st_distance_sphere": {}, "st_endpoint": {}, "st_envelope": {},
	"st_equals": {}, "st_exteriorring": {}, "st_geomcollfromtext": {}, "st_geomcollfromwkb": {},
	"st_geometrycollectionfromtext": {}, "st_geometrycollectionfromwkb": {},
	"st_geometryfromtext": {}, "st_geometryfromwkb": {}, "st_geometryn": {}, "st_geometrytype": {},
	"st_geomfromgeojson": {}, "st_geomfromtext": {}, "st_geomfromwkb": {}, "st_interiorringn": {},
	"st_intersection": {}, "st_intersects": {}, "st_isclosed": {}, "st_isempty": {}, "st_isring": {},
	"st_issimple": {}, "st_length": {}, "st_linefromtext": {}, "st_linefromwkb": {},
	"st_linestringfromtext": {}, "st_linestringfromwkb": {}, "st_mlinefromtext": {},
	"st_mlinefromwkb": {}, "st_mpointfromtext": {}, "st_mpointfromwkb": {}, "st_mpolyfromtext": {},
	"st_mpolyfromwkb": {}, "st_multilinestringfromtext": {}, "st_multilinestringfromwkb": {},
	"st_multipointfromtext": {}, "st_multipointfromwkb": {}, "st_multipolygonfromtext": {},
	"st_multipolygonfromwkb": {}, "st_numgeometries": {}, "st_numinteriorrings": {},
	"st_numpoints": {}, "st_overlaps": {}, "st_pointfromtext": {}, "st_pointfromwkb": {},
	"st_pointn": {}, "st_pointonsurface": {}, "st_polyfromtext": {}, "st_polyfromwkb": {},
	"st_polygonfromtext": {}, "st_polygonfromwkb": {}, "st_relate": {}, "st_srid": {},
	"st_startpoint": {}, "st_symdifference": {}, "st_touches": {}, "st_union": {}, "st_within": {},
	"st_x": {}, "st_y": {}, "startpoint": {}, "std": {}, "stddev": {}, "stddev_pop": {},
	"stddev_samp": {}, "str_to_date": {}, "strcmp": {}, "subdate": {}, "substr": {},
	"substr_oracle": {}, "substring": {}, "substring_index": {}, "subtime": {}, "sum": {},
	"sys_guid": {}, "sysdate": {}, "system_user": {},

	"tan": {}, "time": {}, "time_format": {}, "time_to_sec": {}, "timediff": {}, "timestamp": {},
	"timestampadd": {}, "timestampdiff": {}, "to_base64": {}, "to_char": {}, "to_days": {},
	"to_seconds": {}, "touches": {}, "trim": {}, "trim_oracle": {}, "truncate": {},

	"ucase": {}, "uncompress": {}, "uncompressed_length": {}, "unhex": {}, "unix_timestamp": {},
	"updatexml": {}, "upper": {}, "user": {}, "utc_date": {}, "utc_time": {}, "utc_timestamp": {},
	"uuid": {}, "uuid_short": {},

	"value": {}, "values": {}, "var_pop": {}, "var_samp": {}, "variance": {}, "version": {},

	"week": {}, "weekday": {}, "weekofyear": {}, "weight_string": {}, "within": {},
	"wsrep_last_seen_gtid": {}, "wsrep_last_written_gtid": {}, "wsrep_sync_wait_upto_gtid": {},

	"x": {},

	"y": {}, "year": {}, "yearweek": {},
}

// isBuiltinFunc reports whether lowerName, the lower-case name of an unqualified function
// call as the TiDB parser reports it (ast.FuncCallExpr.FnName.L), is a MariaDB built-in
// function. A name that is not built-in is a call of a stored function or UDF, which may
// write.
func isBuiltinFunc(lowerName string) bool {
	_, ok := builtinFuncs[lowerName]
	return ok
}

// BuiltinFuncNames returns the sorted names of builtinFuncs, for the end-to-end check
// against a real server (tests/builtins_test.go). The caller owns the slice.
func BuiltinFuncNames() []string {
	names := make([]string, 0, len(builtinFuncs))
	for n := range builtinFuncs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
