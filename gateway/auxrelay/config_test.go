package auxrelay

import (
	"errors"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("disabled default: %v", err)
	}
	c.Enabled = true
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "aux_relay.filer.address" {
		t.Fatalf("enabled without filer: %v", err)
	}
	c.Filer.Address = "filer.example"
	if err := c.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for _, tc := range []struct {
		field string
		mod   func(*Config)
	}{
		{"aux_relay.listen_address", func(c *Config) { c.ListenAddress = "nowhere" }},
		{"aux_relay.advertise_address", func(c *Config) { c.AdvertiseAddress = "0.0.0.0" }},
		{"aux_relay.rpcbind_port", func(c *Config) { c.RPCBindPort = 70000 }},
		{"aux_relay.nlm_port", func(c *Config) { c.NLMPort = -2 }},
		{"aux_relay.nsm_port", func(c *Config) { c.MountPort, c.NSMPort = 4000, 4000 }},
		{"aux_relay.filer.rpcbind_port", func(c *Config) { c.Filer.RPCBindPort = 0 }},
		{"aux_relay.client_rpcbind_port", func(c *Config) { c.ClientRPCBindPort = 0 }},
		{"aux_relay.call_timeout", func(c *Config) { c.CallTimeout = 0 }},
		{"aux_relay.max_record_bytes", func(c *Config) { c.MaxRecord = 10 }},
		{"aux_relay.nlm_caller_name", func(c *Config) { c.NLMCallerName = strings.Repeat("x", 2000) }},
	} {
		cc := c
		tc.mod(&cc)
		err := cc.Validate()
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("%s: got %v", tc.field, err)
		}
	}
	// Every port given explicitly: no filer rpcbind needed.
	c.Filer.MountPort, c.Filer.NLMPort, c.Filer.NSMPort, c.Filer.RPCBindPort = 635, 4045, 662, 0
	if err := c.Validate(); err != nil {
		t.Errorf("explicit filer ports: %v", err)
	}
}
