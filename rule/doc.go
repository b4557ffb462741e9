// Package rule is the model of a Santa rule, as an application writes it:
// "when a request carries these bytes at this offset, and has a length in
// this range if one is given (Condition), reply with this many bytes
// (ReplyLen), written by these processors (Put, Copy)".
// It checks a rule against the data plane's limits (Validate, Limits) and
// compiles it into what the data plane stores (Compile): a reply template,
// the pieces copied from the request and the template's checksum. The
// client package sends rules to santad; the C and Python SDKs have the
// same model (docs/rules.md).
package rule
