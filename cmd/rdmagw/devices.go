package main

import "github.com/rdmagw/rdmagw/verbs"

// iwarpDevice is the pure-Go provider's one software device, listed by
// `rdmagw devices` in every build.
var iwarpDevice = verbs.DeviceInfo{Name: "iwarp-go", Provider: "iwarp", Transport: "iWARP", Netdevs: []string{"any"}}
