// On the device, through the app's bridge and Paddle-Lite: the bundled asset set verifies
// against the linked runtime, the golden vectors replay within the bundle's tolerances
// (ek_selftest), every golden image decoded by ImageIO gives Python's tensor exactly and
// Python's result (ek_selftest_image), and a tampered copy is refused with its reason.
#import <ImageIO/ImageIO.h>
#import <XCTest/XCTest.h>

#import "EdgekitBridge.h"

@interface GoldenSelfTests : XCTestCase
@end

@implementation GoldenSelfTests

- (NSString *)assetFolder {
  NSString *folder = [NSBundle.mainBundle pathForResource:@"edgekit" ofType:nil];  // the host app's bundle
  XCTAssertNotNil(folder, @"the app has no edgekit/ resource folder: run `edgekit package --platform ios BUNDLE...`");
  return folder;
}

- (NSDictionary *)jsonObject:(NSString *)json {
  return [NSJSONSerialization JSONObjectWithData:[json dataUsingEncoding:NSUTF8StringEncoding] options:0 error:nil];
}

- (EdgekitBridge *)openedBridge {
  NSError *error = nil;
  EdgekitBridge *bridge = [[EdgekitBridge alloc] initWithFolder:[self assetFolder] options:nil error:&error];
  XCTAssertNotNil(bridge, @"%@", error.localizedDescription);
  return bridge;
}

- (void)testTheAssetSetVerifiesAgainstTheLinkedRuntime {
  NSError *error = nil;
  NSDictionary *described = [self jsonObject:[[self openedBridge] describe:&error]];
  NSString *runtime = [self jsonObject:EdgekitBridge.versionJSON][@"runtime"];
  XCTAssertEqualObjects(described[@"runtime_version"], runtime);
  XCTAssertEqualObjects(described[@"opt_version"], runtime);
  XCTAssertGreaterThan([described[@"models"] count], 0u);
  for (NSDictionary *model in described[@"models"]) XCTAssertTrue([model[@"loaded"] boolValue]);
}

- (void)testGoldenVectorsReplayWithinTolerance {
  NSError *error = nil;
  EKSelftestReport *report = [[self openedBridge] selftestModel:nil error:&error];
  XCTAssertNotNil(report, @"%@", error.localizedDescription);
  XCTAssertTrue(report.ok, @"%@", report.json);
}

- (void)testGoldenImagesDecodedOnTheDeviceGivePythonsTensorsAndResults {
  EdgekitBridge *bridge = [self openedBridge];
  NSError *error = nil;
  NSUInteger checked = 0;
  for (NSDictionary *model in [self jsonObject:[bridge describe:&error]][@"models"]) {
    NSArray<NSString *> *images = model[@"golden_images"];
    for (int32_t i = 0; i < (int32_t)images.count; ++i) {
      CGImageSourceRef source = CGImageSourceCreateWithURL((__bridge CFURLRef)[NSURL fileURLWithPath:images[i]], NULL);
      XCTAssertTrue(source != NULL, @"ImageIO cannot open %@", images[i]);
      CGImageRef image = CGImageSourceCreateImageAtIndex(source, 0, NULL);
      CFRelease(source);
      EKSelftestReport *report = [bridge selftestImageOfModel:model[@"name"] index:i image:image error:&error];
      CGImageRelease(image);
      XCTAssertNotNil(report, @"%@ image %d: %@", model[@"name"], i, error.localizedDescription);
      XCTAssertTrue(report.ok, @"%@ image %d: %@", model[@"name"], i, report.json);
      XCTAssertEqualObjects([self jsonObject:report.json][@"tensor"][@"differing"], @0);
      ++checked;
    }
  }
  XCTAssertGreaterThan(checked, 0u, @"the asset set has no golden images");
}

- (void)testATamperedCopyIsRefusedWithItsReason {
  NSFileManager *files = NSFileManager.defaultManager;
  NSString *copy = [NSTemporaryDirectory() stringByAppendingPathComponent:@"tampered"];
  [files removeItemAtPath:copy error:nil];
  XCTAssertTrue([files copyItemAtPath:[self assetFolder] toPath:copy error:nil]);
  NSString *nb = nil;
  for (NSString *rel in [files enumeratorAtPath:copy]) {
    if ([rel.lastPathComponent isEqualToString:@"model.nb"]) {
      nb = [copy stringByAppendingPathComponent:rel];
      break;
    }
  }
  NSMutableData *bytes = [NSMutableData dataWithContentsOfFile:nb];
  uint8_t *raw = (uint8_t *)bytes.mutableBytes;
  raw[bytes.length / 2] ^= 1;
  XCTAssertTrue([bytes writeToFile:nb atomically:YES]);

  NSError *error = nil;
  EdgekitBridge *bridge = [[EdgekitBridge alloc] initWithFolder:copy options:nil error:&error];
  XCTAssertNil(bridge);
  XCTAssertEqualObjects(error.domain, EKErrorDomain);
  XCTAssertEqual(error.code, EKStatusAssets);
  XCTAssertTrue([error.localizedDescription hasPrefix:@"refused (checksum mismatch): "], @"%@", error.localizedDescription);
  [files removeItemAtPath:copy error:nil];
}

@end
