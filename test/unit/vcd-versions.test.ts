import { describe, expect, it } from "vitest";
import { negotiateVersion } from "../../src/transport/vcd/vcd-versions.js";

// The version an Accept header names (CONTRACT section 7), and the ranges it marks not acceptable.
describe("negotiateVersion", () => {
  const supported = ["37.0", "38.0"];

  it("takes the first supported version of the application ranges, in either form", () => {
    expect(negotiateVersion("application/*+xml;version=38.0", supported)).toBe("38.0");
    expect(negotiateVersion("text/html, application/*;version=39.0, application/*;version=37.0", supported)).toBe("37.0");
    expect(negotiateVersion('application/*+xml; q=0.5; version="38.0"', supported)).toBe("38.0");
  });

  it("refuses a range of weight 0, which RFC 9110 12.4.2 makes not acceptable", () => {
    expect(negotiateVersion("application/*+xml;version=38.0;q=0", supported)).toBeNull();
    expect(negotiateVersion("application/*+xml;q=0.000;version=38.0", supported)).toBeNull();
    expect(negotiateVersion("application/*+xml;version=38.0;q=0, application/*;version=37.0", supported)).toBe("37.0");
    expect(negotiateVersion("application/*+xml;version=38.0;q=0.001", supported)).toBe("38.0");
  });

  it("is null without Accept or a supported version", () => {
    expect(negotiateVersion(undefined, supported)).toBeNull();
    expect(negotiateVersion("application/json", supported)).toBeNull();
  });
});
