package controller

// NodeOfPod exposes the node controller's pod event mapping to the integration tests.
var NodeOfPod = nodeOfPod
