package com.edgekit.hosttest;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Test-only JSON reader and writer (the host JDK has no org.json; Android has it built in):
 * objects are LinkedHashMaps, arrays Lists, numbers Doubles, null {@link #NULL}.
 */
final class MiniJson {
  static final Object NULL = new Object() {
    @Override
    public String toString() {
      return "null";
    }
  };

  private final String text;
  private int at;

  private MiniJson(String text) {
    this.text = text;
  }

  static Object parse(String text) {
    MiniJson p = new MiniJson(text);
    Object value = p.value();
    p.space();
    if (p.at != text.length()) throw p.error("trailing text");
    return value;
  }

  /** root["a"]["b"][2]...: String keys for objects, Integer indices for arrays. */
  static Object get(Object root, Object... path) {
    Object node = root;
    for (Object key : path) {
      if (key instanceof Integer) {
        node = ((List<?>) node).get((Integer) key);
      } else {
        Map<?, ?> map = (Map<?, ?>) node;
        if (!map.containsKey(key)) throw new IllegalArgumentException("no \"" + key + "\" in " + write(node));
        node = map.get(key);
      }
    }
    return node;
  }

  static double number(Object root, Object... path) {
    return (Double) get(root, path);
  }

  static String string(Object root, Object... path) {
    return (String) get(root, path);
  }

  static boolean bool(Object root, Object... path) {
    return (Boolean) get(root, path);
  }

  static List<?> list(Object root, Object... path) {
    return (List<?>) get(root, path);
  }

  static String write(Object value) {
    StringBuilder out = new StringBuilder();
    write(value, out);
    return out.toString();
  }

  private static void write(Object value, StringBuilder out) {
    if (value == null || value == NULL) {
      out.append("null");
    } else if (value instanceof String) {
      out.append('"');
      for (char c : ((String) value).toCharArray()) {
        if (c == '"' || c == '\\') out.append('\\').append(c);
        else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
        else out.append(c);
      }
      out.append('"');
    } else if (value instanceof Map) {
      out.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : ((Map<?, ?>) value).entrySet()) {
        if (!first) out.append(", ");
        first = false;
        write(String.valueOf(e.getKey()), out);
        out.append(": ");
        write(e.getValue(), out);
      }
      out.append('}');
    } else if (value instanceof List) {
      out.append('[');
      boolean first = true;
      for (Object item : (List<?>) value) {
        if (!first) out.append(", ");
        first = false;
        write(item, out);
      }
      out.append(']');
    } else {
      out.append(value);  // numbers, booleans
    }
  }

  private Object value() {
    space();
    if (at >= text.length()) throw error("unexpected end");
    char c = text.charAt(at);
    if (c == '{') return object();
    if (c == '[') return array();
    if (c == '"') return string();
    if (text.startsWith("true", at)) {
      at += 4;
      return Boolean.TRUE;
    }
    if (text.startsWith("false", at)) {
      at += 5;
      return Boolean.FALSE;
    }
    if (text.startsWith("null", at)) {
      at += 4;
      return NULL;
    }
    int start = at;
    while (at < text.length() && "+-0123456789.eE".indexOf(text.charAt(at)) >= 0) at++;
    if (start == at) throw error("unexpected '" + c + "'");
    return Double.valueOf(text.substring(start, at));
  }

  private Map<String, Object> object() {
    Map<String, Object> out = new LinkedHashMap<>();
    at++;
    space();
    if (peek('}')) return out;
    do {
      space();
      String key = string();
      space();
      expect(':');
      out.put(key, value());
      space();
    } while (take(','));
    expect('}');
    return out;
  }

  private List<Object> array() {
    List<Object> out = new ArrayList<>();
    at++;
    space();
    if (peek(']')) return out;
    do {
      out.add(value());
      space();
    } while (take(','));
    expect(']');
    return out;
  }

  private String string() {
    expect('"');
    StringBuilder out = new StringBuilder();
    while (true) {
      char c = text.charAt(at++);
      if (c == '"') return out.toString();
      if (c != '\\') {
        out.append(c);
        continue;
      }
      char e = text.charAt(at++);
      switch (e) {
        case 'n': out.append('\n'); break;
        case 't': out.append('\t'); break;
        case 'r': out.append('\r'); break;
        case 'b': out.append('\b'); break;
        case 'f': out.append('\f'); break;
        case 'u':
          out.append((char) Integer.parseInt(text.substring(at, at + 4), 16));
          at += 4;
          break;
        default: out.append(e);
      }
    }
  }

  private void space() {
    while (at < text.length() && Character.isWhitespace(text.charAt(at))) at++;
  }

  private boolean peek(char c) {
    if (at < text.length() && text.charAt(at) == c) {
      at++;
      return true;
    }
    return false;
  }

  private boolean take(char c) {
    return peek(c);
  }

  private void expect(char c) {
    if (!peek(c)) throw error("expected '" + c + "'");
  }

  private IllegalArgumentException error(String what) {
    return new IllegalArgumentException(what + " at " + at + " in " + text.substring(0, Math.min(text.length(), 200)));
  }
}
