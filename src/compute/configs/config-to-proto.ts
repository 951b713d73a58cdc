import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ConfigBaseResponseSchema, ImageSchema, ResourceSchema, SparkConfigSchema } from "../../../gen/compute/configs/v2/configs_pb.js";
import type { ContainerImage, InstanceConfigs, Resources, SparkConfig } from "../catalog/catalog.js";

// Catalog entries as the configuration calls' messages. The field names differ only where the wire keeps the
// platform's names (instances_types, datahub_images, nfsName); the proto's json_name takes care of those.

export function instanceConfigsToProto(configs: InstanceConfigs): MessageInitShape<typeof ConfigBaseResponseSchema> {
  return {
    regions: configs.regions.map((region) => ({
      key: region.key,
      name: region.name,
      description: region.description,
      nfsName: region.nfsName,
      ssh: region.ssh,
      instancesTypes: region.instanceTypes.map((type) => ({
        key: type.key,
        name: type.name,
        images: type.images.map(imageToProto),
        resource: resourceToProto(type.resource),
      })),
    })),
    datahubImages: configs.datahubImages.map(imageToProto),
    customImages: configs.customImages.map(imageToProto),
  };
}

export function sparkConfigToProto(config: SparkConfig): MessageInitShape<typeof SparkConfigSchema> {
  return {
    key: config.key,
    name: config.name,
    description: config.description,
    region: config.region,
    images: config.images.map(imageToProto),
    driver: { resource: resourceToProto(config.driver.resource) },
    executor: {
      resource: resourceToProto(config.executor.resource),
      instances: config.executor.instances,
      maxInstances: config.executor.maxInstances,
    },
  };
}

function imageToProto(image: ContainerImage): MessageInitShape<typeof ImageSchema> {
  return { name: image.name, tags: [...image.tags] };
}

function resourceToProto(resource: Resources): MessageInitShape<typeof ResourceSchema> {
  return { limits: { ...resource.limits }, requests: { ...resource.requests } };
}
