//go:build !linux

package gateway

func trimResident() {}
