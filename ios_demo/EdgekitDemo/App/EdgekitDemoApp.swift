import SwiftUI

@main
struct EdgekitDemoApp: App {
    var body: some Scene {
        WindowGroup {
            ContentView()
        }
    }
}
