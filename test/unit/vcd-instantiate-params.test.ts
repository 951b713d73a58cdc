import { describe, expect, it } from "vitest";
import { decodeInstantiateParams } from "../../src/transport/vcd/vcd-instantiate-params.js";
import { XmlRefusal } from "../../src/transport/vcd/xml-refusal.js";

const NS = 'xmlns="http://www.vmware.com/vcloud/v1.5" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1"';

function refusal(body: string): string {
  try {
    decodeInstantiateParams(body, "vdc");
  } catch (err) {
    if (err instanceof XmlRefusal) return err.message;
    throw err;
  }
  throw new Error("not refused");
}

describe("InstantiateVAppTemplateParams", () => {
  it("decodes every field into the request, entities and character references expanded", () => {
    const request = decodeInstantiateParams(
      `<p:InstantiateVAppTemplateParams xmlns:p="http://www.vmware.com/vcloud/v1.5" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" name="a &amp; b" deploy="1" powerOn="false">` +
        `<p:Description>x &lt;y&gt; &#65;</p:Description>` +
        `<p:InstantiationParams><p:NetworkConfigSection><ovf:Info>i</ovf:Info><p:NetworkConfig networkName="net"/></p:NetworkConfigSection></p:InstantiationParams>` +
        `<p:Source href="https://h/api/vAppTemplate/vappTemplate-t"/><p:IsSourceDelete>false</p:IsSourceDelete><p:AllEULAsAccepted>true</p:AllEULAsAccepted>` +
        `</p:InstantiateVAppTemplateParams>`,
      "vdc-1",
    );
    expect(request).toMatchObject({
      serviceInstanceId: "vdc-1",
      name: "a & b",
      description: "x <y> A",
      source: "https://h/api/vAppTemplate/vappTemplate-t",
      networkName: "net",
      deploy: true,
      powerOn: false,
      allEulasAccepted: true,
    });
  });

  it("passes what is missing on as empty, for the domain to refuse; deploy and powerOn default to true, as in VCD's schema", () => {
    expect(decodeInstantiateParams(`<InstantiateVAppTemplateParams ${NS}/>`, "v")).toMatchObject({ name: "", source: "", networkName: "", deploy: true, powerOn: true });
    expect(decodeInstantiateParams(`<InstantiateVAppTemplateParams ${NS} deploy="false"/>`, "v")).toMatchObject({ deploy: false, powerOn: true });
    expect(decodeInstantiateParams(`<InstantiateVAppTemplateParams ${NS} powerOn="0"/>`, "v")).toMatchObject({ deploy: true, powerOn: false });
  });

  it("refuses elements of another namespace, unsupported ones, and bad booleans", () => {
    expect(refusal(`<InstantiateVAppTemplateParams ${NS}><ovf:Source href="x"/></InstantiateVAppTemplateParams>`)).toContain("has no child element Source");
    expect(refusal(`<InstantiateVAppTemplateParams ${NS}><SourcedItem/></InstantiateVAppTemplateParams>`)).toBe("SourcedItem is not supported by this server");
    expect(refusal(`<InstantiateVAppTemplateParams ${NS} deploy="yes"/>`)).toBe('the deploy attribute must be true or false, got "yes"');
    expect(refusal(`<InstantiateVAppTemplateParams ${NS}><InstantiationParams><LeaseSettingsSection/></InstantiationParams></InstantiateVAppTemplateParams>`)).toBe(
      "InstantiationParams may hold only a NetworkConfigSection; LeaseSettingsSection is not supported by this server",
    );
    expect(
      refusal(`<InstantiateVAppTemplateParams ${NS}><InstantiationParams><NetworkConfigSection><NetworkConfig networkName="a"/><NetworkConfig networkName="b"/></NetworkConfigSection></InstantiationParams></InstantiateVAppTemplateParams>`),
    ).toBe("a vApp is connected to one org network here: give one NetworkConfig");
    expect(refusal(`<InstantiateVAppTemplateParams ${NS}><IsSourceDelete>true</IsSourceDelete></InstantiateVAppTemplateParams>`)).toContain("IsSourceDelete true is not supported");
    expect(refusal(`<x:InstantiateVAppTemplateParams/>`)).toBe("the element x:InstantiateVAppTemplateParams uses the undeclared namespace prefix x");
    expect(refusal(`<?xml version="1.0"?><!DOCTYPE a><a/>`)).toBe("the body declares a DOCTYPE or entities, which this API does not accept");
  });
});
