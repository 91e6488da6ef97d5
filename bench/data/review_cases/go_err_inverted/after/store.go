package store

import (
	"encoding/json"
	"os"
)

type Item struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// Save writes the items as JSON, through a temporary file so a crash leaves the old file whole.
func Save(path string, items []Item) error {
	data, err := json.Marshal(items)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err == nil {
		return err
	}
	return os.Rename(tmp, path)
}
