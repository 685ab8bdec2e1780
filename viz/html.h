#pragma once

/// \file
/// Text for Graphviz HTML-like labels and DOT strings. Every piece of user
/// text a diagram shows (keys, arguments, module descriptions, titles) goes
/// through one of these.

#include <string>
#include <string_view>

namespace tdfx {

/// `text` made safe inside a Graphviz HTML-like label: `& < > "` become
/// `&amp; &lt; &gt; &quot;`, and `' { } |` numeric references, so no
/// character of a key or argument can end the label or open markup.
/// Characters XML cannot carry, which would make Graphviz drop the whole
/// label, are shown as escapes: `\n`, `\r`, `\t`, and `\xNN` for other
/// control characters (C0 and DEL) and for bytes that are not well-formed UTF-8.
///
///     escape_html("a|<b>&\"") == "a&#124;&lt;b&gt;&amp;&quot;"
///     escape_html("a\x01\n") == "a\\x01\\n"
std::string escape_html(std::string_view text);

/// `text` as a quoted DOT string (`"a\"b"`), for identifiers and attributes.
std::string dot_quote(std::string_view text);

/// `text` cut to at most `max_bytes` bytes (on a UTF-8 boundary) with `...`
/// appended when cut, so that one huge argument does not make a node
/// thousands of points wide.
std::string truncate_text(std::string_view text, size_t max_bytes);

}  // namespace tdfx
