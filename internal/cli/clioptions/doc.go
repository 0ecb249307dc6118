// Package clioptions holds what every command of kubectl-maintenance shares: the kubeconfig
// flags and I/O streams (Options), the clients and scheme made from them, the TAB completion of
// node and NodeMaintenance names, the exit codes a script can rely on, usage errors, and the
// label that marks the NodeMaintenances the plugin created. The commands' packages import it;
// it imports none of them.
package clioptions
