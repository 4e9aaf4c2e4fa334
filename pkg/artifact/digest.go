package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Metadata keys with a meaning to readers (docs/FORMAT.md §2.5). Readers
// must not require either: artifacts written before they existed lack them.
const (
	// MetaDirectorySHA256 is the directory digest, written by the writer
	// (any value given in Meta.Metadata is replaced): 64 lowercase hex
	// digits, the SHA-256 of the directory bytes with these 64 digits
	// replaced by '0'. Open checks it when present.
	MetaDirectorySHA256 = "directory_sha256"
	// MetaConfigDefaults is written by ninfer-convert: an object mapping
	// every config field that config.json left out (a components.text.config
	// member name, or full_attention_interval) to the transformers
	// Qwen3_5TextConfig default it took; {} when config.json gave them all.
	MetaConfigDefaults = "config_defaults"
)

// digestSlot returns the offset in js of the 64 hex digits of the root
// member metadata.directory_sha256, or -1 when there is none. The value
// must be a plain JSON string (no escapes) of 64 lowercase hex digits. js
// must already be a valid directory (one JSON object).
func digestSlot(js []byte) (int, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	if _, err := dec.Token(); err != nil { // {
		return -1, err
	}
	slot := -1
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return -1, err
		}
		if key != "metadata" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return -1, err
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return -1, fmt.Errorf("metadata must be an object")
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return -1, err
			}
			if k != MetaDirectorySHA256 {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return -1, err
				}
				continue
			}
			if slot >= 0 {
				return -1, fmt.Errorf("metadata has two %s members", MetaDirectorySHA256)
			}
			v, err := dec.Token()
			if err != nil {
				return -1, err
			}
			s, _ := v.(string)
			end := int(dec.InputOffset())
			if !isLowerHex(s, 64) || end < 66 || string(js[end-66:end]) != `"`+s+`"` {
				return -1, fmt.Errorf("metadata.%s must be a string of 64 lowercase hex digits written without escapes", MetaDirectorySHA256)
			}
			slot = end - 65
		}
		if _, err := dec.Token(); err != nil { // }
			return -1, err
		}
	}
	return slot, nil
}

// directoryDigest is the SHA-256 of js with the 64 bytes at slot read as
// ASCII '0'.
func directoryDigest(js []byte, slot int) string {
	h := sha256.New()
	h.Write(js[:slot])
	h.Write([]byte(zeroHash))
	h.Write(js[slot+64:])
	return hex.EncodeToString(h.Sum(nil))
}

// sealDirectory writes the directory digest into its slot in js.
func sealDirectory(js []byte) error {
	slot, err := digestSlot(js)
	if err != nil {
		return err
	}
	if slot < 0 {
		return fmt.Errorf("directory has no metadata.%s", MetaDirectorySHA256)
	}
	copy(js[slot:], directoryDigest(js, slot))
	return nil
}

// checkDigest verifies metadata.directory_sha256 when present and records
// it in f.DirectorySHA256.
func (f *File) checkDigest(js []byte) error {
	slot, err := digestSlot(js)
	if err != nil {
		return f.errf("", "directory: %v", err)
	}
	if slot < 0 {
		return nil
	}
	recorded := string(js[slot : slot+64])
	if got := directoryDigest(js, slot); got != recorded {
		return f.errf("", "directory sha256 mismatch: the directory hashes to %s, metadata.%s records %s (the directory was changed after it was written)", got, MetaDirectorySHA256, recorded)
	}
	f.DirectorySHA256 = recorded
	return nil
}

// ConfigDefaults returns metadata.config_defaults: the config fields the
// converter defaulted and their values (numbers as json.Number). ok is
// false when the artifact does not record them.
func (f *File) ConfigDefaults() (defaults map[string]any, ok bool) {
	m, ok := f.Metadata[MetaConfigDefaults].(map[string]any)
	return m, ok
}

// MetaArtifactID is written by the writer (any value given in Meta.Metadata
// is replaced): the header's artifact_id as 32 lowercase hex digits. The
// header is covered by no hash; recording the id in the directory puts it
// under the directory digest, and Open checks that the two agree.
const MetaArtifactID = "artifact_id"

// checkArtifactID checks metadata.artifact_id, when present, against the
// header's artifact_id and records the outcome in f.ArtifactIDChecked.
// Absent (an artifact written before it was recorded): accepted, and the
// header's id is covered by nothing.
func (f *File) checkArtifactID() error {
	v, ok := f.Metadata[MetaArtifactID]
	if !ok {
		return nil
	}
	s, _ := v.(string)
	if !isLowerHex(s, 32) {
		return f.errf("", "metadata.%s must be a string of 32 lowercase hex digits", MetaArtifactID)
	}
	if got := hex.EncodeToString(f.ID[:]); got != s {
		return f.errf("", "header artifact_id %s does not match metadata.%s %s (the header was changed after it was written)", got, MetaArtifactID, s)
	}
	f.ArtifactIDChecked = true
	return nil
}
