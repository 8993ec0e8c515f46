package com.edgekit.demo.core;

/**
 * A call into the core failed: the {@link Status} and the core's one-line reason
 * ({@code ek_last_error()}: "what; fix"), e.g. "refused (checksum mismatch): digits/model.nb ...".
 */
public final class EdgekitException extends Exception {
  private static final long serialVersionUID = 1L;

  /** edgekit_c.h's ek_status, in its order (the code is the ordinal). */
  public enum Status {
    OK, INTERNAL, ARGUMENT, MODEL, VERSION, INPUT, RUN, OUTPUT, ASSETS, UNAVAILABLE, SELFTEST;

    /** The core's name for it ("assets", "unavailable", ...), as ek_status_name() spells it. */
    public String coreName() {
      return name().toLowerCase(java.util.Locale.ROOT);
    }

    static Status ofCode(int code) {
      Status[] all = values();
      return code >= 0 && code < all.length ? all[code] : INTERNAL;
    }
  }

  private final Status status;
  private final int code;

  /** Called by the JNI bridge. */
  EdgekitException(int code, String message) {
    super(message);
    this.code = code;
    this.status = Status.ofCode(code);
  }

  public Status status() {
    return status;
  }

  /** The raw ek_status value. */
  public int code() {
    return code;
  }

  /** True when the asset set was refused (checksums, missing files, schema, or the opt/runtime version lock). */
  public boolean isRefusal() {
    return status == Status.ASSETS || status == Status.VERSION;
  }
}
