import AVFoundation
import SwiftUI

struct ContentView: View {
    @StateObject private var camera = CameraModel()

    var body: some View {
        ZStack(alignment: .bottom) {
            CameraPreview(session: camera.session).ignoresSafeArea()
            OverlayView(overlay: camera.overlay).ignoresSafeArea()
            VStack(alignment: .leading, spacing: 6) {
                if let refusal = camera.refusal {
                    Text(refusal)
                        .foregroundColor(.white)
                        .padding(8)
                        .frame(maxWidth: .infinity, alignment: .leading)
                        .background(Color.red)
                }
                Text(camera.status).foregroundColor(.white).onTapGesture { camera.nextMode() }
                Text(camera.timings).font(.system(.footnote, design: .monospaced)).foregroundColor(.green)
            }
            .padding(12)
            .frame(maxWidth: .infinity, alignment: .leading)
            .background(Color.black.opacity(0.6))
        }
        .onAppear { camera.start() }
    }
}

/// AVFoundation's preview layer, filling the view as the overlay assumes (aspect fill, centred).
struct CameraPreview: UIViewRepresentable {
    let session: AVCaptureSession

    final class PreviewUIView: UIView {
        override class var layerClass: AnyClass { AVCaptureVideoPreviewLayer.self }
        var previewLayer: AVCaptureVideoPreviewLayer { layer as! AVCaptureVideoPreviewLayer }
    }

    func makeUIView(context: Context) -> PreviewUIView {
        let view = PreviewUIView()
        view.previewLayer.session = session
        view.previewLayer.videoGravity = .resizeAspectFill
        return view
    }

    func updateUIView(_ uiView: PreviewUIView, context: Context) {}
}
