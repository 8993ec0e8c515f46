package com.edgekit.demo.core;

/**
 * What ek_selftest / ek_selftest_image returned: whether every gated check passed, and the
 * report (JSON) saying which ran and with which figures. A failing check is a report, not
 * an exception; a self-test that could not run at all throws {@link EdgekitException}.
 */
public final class SelftestReport {
  public final boolean ok;
  public final String json;

  SelftestReport(boolean ok, String json) {
    this.ok = ok;
    this.json = json;
  }

  @Override
  public String toString() {
    return (ok ? "ok: " : "FAILED: ") + json;
  }
}
