// What Swift sees of the Objective-C++ side: only the bridge (the C API stays behind it).
#import "EdgekitBridge.h"
