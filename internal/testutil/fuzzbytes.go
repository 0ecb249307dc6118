package testutil

// FuzzBytes hands out a fuzzer's bytes one by one, and zeros past their end, for the fuzz
// targets that build their inputs from them.
type FuzzBytes struct {
	Data []byte
	i    int
}

// Byte returns the next byte, or 0 past the end.
func (b *FuzzBytes) Byte() byte {
	if b.i >= len(b.Data) {
		return 0
	}
	v := b.Data[b.i]
	b.i++
	return v
}

// More reports whether bytes are left.
func (b *FuzzBytes) More() bool { return b.i < len(b.Data) }
