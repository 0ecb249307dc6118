// Package controller holds nodemaint's reconcilers: the node side of a maintenance (cordon, taint,
// condition, annotation and the pods' evacuation requests) and the NodeMaintenance itself
// (finalizer, status, Events).
package controller
