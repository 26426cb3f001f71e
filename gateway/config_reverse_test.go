package gateway

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// configs/reverse.yaml documents the reverse defaults: loading it gives
// exactly DefaultConfigFor("reverse"), and every field has a line.
func TestShippedReverseYAMLIsTheDefaults(t *testing.T) {
	path := filepath.Join("..", "configs", "reverse.yaml")
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen.AllowedNetworks = nil
	if def := DefaultConfigFor("reverse"); !reflect.DeepEqual(*cfg, def) {
		t.Fatalf("configs/reverse.yaml differs from DefaultConfigFor(reverse):\n got %+v\nwant %+v", *cfg, def)
	}
	raw, _ := os.ReadFile(path)
	text := string(raw)
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for i := 0; i < tp.NumField(); i++ {
			f := tp.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !strings.Contains(text, "\n"+strings.Repeat(" ", strings.Count(path, ".")*2)+name+":") {
				t.Errorf("configs/reverse.yaml has no line for %s%s", path, name)
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				walk(f.Type, path+name+".")
			}
		}
	}
	walk(reflect.TypeOf(Config{}), "")
}

// The port defaults follow the mode named in the file.
func TestReverseModeDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte("mode: reverse\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen.Port != 2049 || cfg.Backend.Port != 20049 {
		t.Fatalf("reverse ports: listen %d backend %d", cfg.Listen.Port, cfg.Backend.Port)
	}
	cfg, err = ParseConfig([]byte("mode: forward\n"))
	if err != nil || cfg.Listen.Port != 20049 || cfg.Backend.Port != 2049 {
		t.Fatalf("forward ports: %+v %v", cfg, err)
	}
}
