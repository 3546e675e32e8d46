// Package fleetha holds the end-to-end tests of a fleet's failover (issue 27):
// three sluices, each a process of its own so that one can be stopped
// (SIGSTOP) or killed, share a 3-member etcd cluster ([fleet]) in front of a
// semi-synchronous sandbox topology; the master gets kill -9 and the tests
// check, from etcd, from each instance's metrics and from the servers
// themselves, that exactly one instance promotes exactly one replica, that a
// stopped prober-leader cannot write after it lost its lease, and that
// without an etcd quorum nothing is promoted. Nothing here is needed by the
// binary.
package fleetha
