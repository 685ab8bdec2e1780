#pragma once

/// \file
/// Text for Graphviz HTML-like labels and DOT strings. Every piece of user
/// text a diagram shows (keys, arguments, module descriptions, titles) goes
/// through one of these.

#include <string>
#include <string_view>
#include <vector>

namespace tdfx {

/// `text` made safe inside a Graphviz HTML-like label: `&`, `<`, `>` and the double quote
/// become `&amp; &lt; &gt; &quot;`, and `' { } |` numeric references, so no
/// character of a key or argument can end the label or open markup.
/// Characters XML cannot carry, which would make Graphviz drop the whole
/// label, are shown as escapes: `\n`, `\r`, `\t`, and `\xNN` for other
/// control characters (C0 and DEL) and for bytes that are not well-formed UTF-8.
/// Graphviz reads a backslash in a label as the start of an escape (`\N` is the node's
/// name, `\\` one backslash), so each backslash, the escapes' too, is written twice.
///
///     escape_html("a|<b>&\"") == "a&#124;&lt;b&gt;&amp;&quot;"
///     escape_html("a\\N\x01") == "a\\\\N\\\\x01"   // drawn as a\N\x01
std::string escape_html(std::string_view text);

/// escape_html for HTML and XML text that no Graphviz reads (the page's title): the same
/// entities and escapes, a backslash written once.
std::string escape_markup(std::string_view text);

/// `text` as a quoted DOT string (`"a\"b"`), for identifiers and attributes.
std::string dot_quote(std::string_view text);

/// A colour from the caller (an overlay's fill), kept to `#rrggbb` or a plain colour name so
/// that it cannot end the quoted attribute it goes into; tdfx::Error for anything else.
std::string dot_escape_colour(const std::string& colour);

/// `text` cut to at most `max_bytes` bytes (on a UTF-8 boundary) with `...`
/// appended when cut, so that one huge argument does not make a node
/// thousands of points wide.
std::string truncate_text(std::string_view text, size_t max_bytes);

/// `text` broken into lines of at most `width` bytes where it can be: after a space (a
/// comma's, in `Linear(in_features=100, out_features=50, bias=true)`). A word longer than
/// `width` is a line of its own, cut only at `width` on a UTF-8 boundary; so no line is
/// wider than `width` bytes and nothing is lost. Lines are not escaped.
///
///     wrap_text("Linear(in_features=100, out_features=50)", 24)
///         == {"Linear(in_features=100, ", "out_features=50)"}
std::vector<std::string> wrap_text(std::string_view text, size_t width);

/// wrap_text's lines escaped with escape_html and joined by `<br/>` (a cell with
/// `balign="left"` aligns them left).
std::string wrapped_html(std::string_view text, size_t width);

}  // namespace tdfx
