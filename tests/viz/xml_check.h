#pragma once
// A minimal XML well-formedness checker for the SVG Graphviz writes: tags
// nest and close, attribute values are quoted, every entity is known. It
// collects the text of every element, entities decoded, so tests can look
// for node names and keys as a viewer would show them.

#include <cctype>
#include <string>
#include <vector>

namespace tdfx::testing {

struct XmlDocument {
  /// "" when well-formed, else what is wrong and where.
  std::string error;
  /// Decoded character data, one entry per run of text.
  std::vector<std::string> texts;
  /// Number of elements.
  size_t elements = 0;

  /// All texts joined by newlines.
  std::string all_text() const {
    std::string out;
    for (const auto& t : texts) out += t + "\n";
    return out;
  }
};

namespace detail {

inline void append_utf8(std::string& out, unsigned long cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// Decodes `raw`'s entities; returns false on an unknown or unterminated one.
inline bool decode(const std::string& raw, std::string& out) {
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '<') return false;
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t semi = raw.find(';', i);
    if (semi == std::string::npos) return false;
    const std::string name = raw.substr(i + 1, semi - i - 1);
    if (name == "amp")
      out += '&';
    else if (name == "lt")
      out += '<';
    else if (name == "gt")
      out += '>';
    else if (name == "quot")
      out += '"';
    else if (name == "apos")
      out += '\'';
    else if (name.size() > 2 && name[0] == '#' && name[1] == 'x')
      append_utf8(out, std::stoul(name.substr(2), nullptr, 16));
    else if (name.size() > 1 && name[0] == '#')
      append_utf8(out, std::stoul(name.substr(1)));
    else
      return false;
    i = semi;
  }
  return true;
}

inline bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

}  // namespace detail

inline XmlDocument parse_xml(const std::string& xml) {
  XmlDocument doc;
  std::vector<std::string> open;
  bool root_seen = false;
  size_t i = 0;
  auto error = [&](const std::string& what) {
    doc.error = what + " at byte " + std::to_string(i);
    return doc;
  };
  auto skip_to = [&](const std::string& end) {
    const size_t at = xml.find(end, i);
    if (at == std::string::npos) return false;
    i = at + end.size();
    return true;
  };
  while (i < xml.size()) {
    if (xml[i] != '<') {
      const size_t next = xml.find('<', i);
      const std::string raw = xml.substr(i, next == std::string::npos ? next : next - i);
      std::string text;
      if (!detail::decode(raw, text)) return error("bad entity in text");
      if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos) {
        return error("text outside the root element");
      }
      if (!open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos) {
        doc.texts.push_back(text);
      }
      i = next == std::string::npos ? xml.size() : next;
      continue;
    }
    if (xml.compare(i, 4, "<!--") == 0) {
      if (!skip_to("-->")) return error("unterminated comment");
    } else if (xml.compare(i, 2, "<?") == 0) {
      if (!skip_to("?>")) return error("unterminated processing instruction");
    } else if (xml.compare(i, 9, "<!DOCTYPE") == 0) {
      if (root_seen || !skip_to(">")) return error("misplaced DOCTYPE");
    } else if (xml.compare(i, 2, "</") == 0) {
      size_t j = i + 2;
      while (j < xml.size() && detail::is_name_char(xml[j])) ++j;
      const std::string name = xml.substr(i + 2, j - i - 2);
      while (j < xml.size() && std::isspace(static_cast<unsigned char>(xml[j]))) ++j;
      if (j >= xml.size() || xml[j] != '>') return error("bad end tag");
      if (open.empty() || open.back() != name) return error("end tag </" + name + "> mismatched");
      open.pop_back();
      i = j + 1;
    } else {
      size_t j = i + 1;
      while (j < xml.size() && detail::is_name_char(xml[j])) ++j;
      const std::string name = xml.substr(i + 1, j - i - 1);
      if (name.empty()) return error("bad start tag");
      if (open.empty() && root_seen) return error("second root element");
      root_seen = true;
      ++doc.elements;
      std::vector<std::string> attrs;
      while (true) {
        while (j < xml.size() && std::isspace(static_cast<unsigned char>(xml[j]))) ++j;
        if (j >= xml.size()) return error("unterminated tag <" + name + ">");
        if (xml[j] == '>' || xml.compare(j, 2, "/>") == 0) break;
        const size_t a = j;
        while (j < xml.size() && detail::is_name_char(xml[j])) ++j;
        const std::string attr = xml.substr(a, j - a);
        if (attr.empty() || j >= xml.size() || xml[j] != '=') return error("bad attribute");
        for (const auto& seen : attrs) {
          if (seen == attr) return error("duplicate attribute " + attr);
        }
        attrs.push_back(attr);
        ++j;
        if (j >= xml.size() || (xml[j] != '"' && xml[j] != '\'')) return error("unquoted value");
        const size_t close = xml.find(xml[j], j + 1);
        if (close == std::string::npos) return error("unterminated value");
        std::string value;
        if (!detail::decode(xml.substr(j + 1, close - j - 1), value)) {
          return error("bad entity in attribute " + attr);
        }
        j = close + 1;
      }
      if (xml[j] == '/') {
        i = j + 2;
      } else {
        open.push_back(name);
        i = j + 1;
      }
    }
  }
  if (!open.empty()) return error("unclosed <" + open.back() + ">");
  if (!root_seen) return error("no root element");
  return doc;
}

}  // namespace tdfx::testing
