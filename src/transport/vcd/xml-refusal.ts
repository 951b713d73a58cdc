// A request body that cannot be read as the document asked for: 400 XML_INVALID, with the message as it is.
export class XmlRefusal extends Error {
  override readonly name = "XmlRefusal";
}
