package netns

import "github.com/netio-go/netio/internal/testpattern"

// maxMsgSize bounds the messages of the roles (roleConfig.Size).
const maxMsgSize = 64 << 10

// msgPattern is what every message carries, so that the receiver can
// verify it on its own: the test pattern with its header (package
// internal/testpattern), which names the message's stream (one per sender)
// and sequence number and its length; the body depends on both and on the
// offset, so that a message from another stream, a repeated or reordered
// message, or a shifted or corrupted byte is caught.
var msgPattern = testpattern.New(maxMsgSize, testpattern.WithHeader())
